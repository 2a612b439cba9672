"""Attention features on the CPU simulator against a float64 reference built with explicit masks:
sliding windows, GQA/MQA, softcap, score_mod / mask_mod, variable lengths, gelu/silu activations;
compile reports of each variant; input errors."""
import math
import re

import pytest
import torch
import triton.language as tl

import tlx
import tlx.ops
from tlx.kernels import attention

F16 = torch.float16
# a row that attends nothing has LSE log2(0) = -inf on purpose (numpy warns on the simulator)
pytestmark = pytest.mark.filterwarnings("ignore:divide by zero encountered in log2:RuntimeWarning")


# -- user functions fused into the kernel (and their torch twins for the reference) ------------------

@tlx.jit
def alibi(score, b, h, q_idx, kv_idx):
    return score - (h + 1) * 0.125 * tl.abs(q_idx - kv_idx).to(tl.float32)


def alibi_ref(score, b, h, i, j):
    return score - (h + 1) * 0.125 * (i - j).abs()


@tlx.jit
def every_third(b, h, q_idx, kv_idx):
    return (q_idx + kv_idx) % 3 != 1


def every_third_ref(b, h, i, j):
    return (i + j) % 3 != 1


@tlx.jit
def strictly_past(b, h, q_idx, kv_idx):
    return kv_idx < q_idx                                  # row 0 attends nothing


def strictly_past_ref(b, h, i, j):
    return j < i


# -- reference ---------------------------------------------------------------------------------------

def reference(q, k, v, causal=False, window=None, scale=None, softcap=None, score_mod=None, mask_mod=None,
              activation="softmax", batch0=0, dtype=torch.float64):
    """(out, lse) in `dtype` for bhsd q, k, v; masks built explicitly over (b, h, i, j)."""
    B, H, S, D = q.shape
    Sk, g, dev = k.shape[2], H // k.shape[1], q.device
    kd, vd = k.to(dtype).repeat_interleave(g, 1), v.to(dtype).repeat_interleave(g, 1)
    s = q.to(dtype) @ kd.transpose(-1, -2) * (scale or 1 / math.sqrt(D))
    if softcap:
        s = softcap * torch.tanh(s / softcap)
    b = batch0 + torch.arange(B, device=dev).view(B, 1, 1, 1)
    h = torch.arange(H, device=dev).view(1, H, 1, 1)
    i, j = torch.arange(S, device=dev).view(S, 1), torch.arange(Sk, device=dev).view(1, Sk)
    if score_mod is not None:
        s = score_mod(s, b, h, i, j)
    keep = torch.ones(B, H, S, Sk, dtype=torch.bool, device=dev)
    if causal:
        keep &= j <= i
    if window is not None:
        left, right = window
        keep &= (j >= i - left) if left is not None else True
        keep &= (j <= i + right) if right is not None else True
    if mask_mod is not None:
        keep &= mask_mod(b, h, i, j)
    if activation != "softmax":
        act = {"gelu": torch.nn.functional.gelu, "silu": torch.nn.functional.silu}[activation]
        return act(s).masked_fill(~keep, 0) @ vd, None
    s = s.masked_fill(~keep, float("-inf"))
    lse = torch.logsumexp(s, -1)
    p = torch.exp(s - lse[..., None]).nan_to_num(0.0)      # a row that attends nothing: output 0
    return p @ vd, lse


def rel_err(out, ref):
    return ((out.double() - ref).norm() / ref.norm()).item()


def randn(*shape):
    return torch.randn(*shape, dtype=F16)


def run_sim(q, k, v, config=None, **kw):
    out = torch.full_like(q, float("nan"))                 # poisoned: every row must be written
    res = attention.attention(q, k, v, backend="sim", config=config, out=out,
                              return_lse=kw.get("activation", "softmax") == "softmax", **kw)
    return res if isinstance(res, tuple) else (res, None)


def check(out, lse, ref, ref_lse):
    assert not torch.isnan(out).any()
    assert rel_err(out, ref) <= 1e-2
    if ref_lse is not None:
        assert torch.equal(torch.isinf(lse), torch.isinf(ref_lse))
        finite = torch.isfinite(ref_lse)
        assert rel_err(lse[finite], ref_lse[finite]) <= 1e-4


# -- features on the simulator -------------------------------------------------------------------------

@pytest.mark.parametrize("window,causal,D,bn,pingpong", [
    ((40, 20), False, 64, 64, False), ((96, None), True, 128, 128, True), ((None, 70), False, 64, 64, True),
    ((0, 0), False, 128, 64, False)], ids=["both-sides", "causal-left", "right-only", "diagonal"])
def test_sliding_window(window, causal, D, bn, pingpong):
    q, k, v = randn(1, 2, 256, D), randn(1, 2, 256, D), randn(1, 2, 256, D)
    out, lse = run_sim(q, k, v, attention.Config(BN=bn, PINGPONG=pingpong), causal=causal, window=window)
    check(out, lse, *reference(q, k, v, causal=causal, window=window))


@pytest.mark.parametrize("window,causal", [((40, 20), False), ((None, 0), False), ((30, None), True)])
def test_window_skips_blocks_outside(window, causal, monkeypatch):
    """Only the K/V blocks that intersect a tile's key range [m0 - left, m0 + BM - 1 + right] are loaded."""
    from tlx.sim import interp
    loads = []
    real = interp.descriptor_load
    monkeypatch.setattr(interp, "descriptor_load", lambda desc, offsets: loads.append(offsets) or real(desc, offsets))
    S, BM, BN = 512, 128, 64
    q, k, v = randn(1, 1, S, 64), randn(1, 1, S, 64), randn(1, 1, S, 64)
    out, lse = run_sim(q, k, v, attention.Config(BN=BN), causal=causal, window=window)
    check(out, lse, *reference(q, k, v, causal=causal, window=window))
    left, right = window[0], 0 if causal else window[1]
    blocks = 0
    for m0 in range(0, S, BM):
        first = max(m0 - left, 0) if left is not None else 0
        last = min(m0 + BM - 1 + right, S - 1) if right is not None else S - 1
        blocks += last // BN - first // BN + 1
    assert len(loads) == 2 * (S // BM) + 2 * blocks < 2 * (S // BM) * (1 + S // BN)


@pytest.mark.parametrize("hkv,layout", [(1, "bhsd"), (1, "bshd"), (2, "bhsd")], ids=["mqa", "mqa-bshd", "gqa"])
def test_gqa_and_mqa(hkv, layout):
    q, k, v = randn(1, 4, 256, 64), randn(1, hkv, 256, 64), randn(1, hkv, 256, 64)
    t = (lambda x: x.transpose(1, 2).contiguous()) if layout == "bshd" else (lambda x: x)
    out, lse = run_sim(t(q), t(k), t(v), causal=True, layout=layout)
    ref, ref_lse = reference(q, k, v, causal=True)
    check(out.transpose(1, 2) if layout == "bshd" else out, lse, ref, ref_lse)


@pytest.mark.parametrize("causal", [False, True])
def test_softcap(causal):
    q, k, v = randn(1, 2, 256, 64) * 2, randn(1, 2, 256, 64), randn(1, 2, 256, 64)
    out, lse = run_sim(q, k, v, causal=causal, softcap=3.0)
    check(out, lse, *reference(q, k, v, causal=causal, softcap=3.0))


def test_score_mod_alibi():
    q, k, v = randn(1, 2, 256, 64), randn(1, 2, 256, 64), randn(1, 2, 256, 64)
    out, lse = run_sim(q, k, v, attention.Config(PINGPONG=True), causal=True, score_mod=alibi)
    check(out, lse, *reference(q, k, v, causal=True, score_mod=alibi_ref))


@pytest.mark.parametrize("fn,ref_fn,causal", [(every_third, every_third_ref, True),
                                              (strictly_past, strictly_past_ref, False)], ids=["sparse", "empty-row"])
def test_mask_mod(fn, ref_fn, causal):
    q, k, v = randn(1, 2, 256, 64), randn(1, 2, 256, 64), randn(1, 2, 256, 64)
    out, lse = run_sim(q, k, v, attention.Config(BN=64), causal=causal, mask_mod=fn, softcap=5.0)
    ref, ref_lse = reference(q, k, v, causal=causal, mask_mod=ref_fn, softcap=5.0)
    check(out, lse, ref, ref_lse)
    if fn is strictly_past:
        assert torch.all(out[:, :, 0] == 0) and torch.all(lse[:, :, 0] == float("-inf"))


@pytest.mark.parametrize("activation,causal,window", [("gelu", False, None), ("silu", True, None),
                                                      ("gelu", False, (50, 30))])
def test_activation(activation, causal, window):
    q, k, v = randn(1, 2, 256, 64), randn(1, 2, 256, 64), randn(1, 2, 256, 64)
    out, _ = run_sim(q, k, v, attention.Config(BN=64), causal=causal, window=window, activation=activation)
    check(out, None, *reference(q, k, v, causal=causal, window=window, activation=activation))


def varlen_reference(q, k, v, cu_q, cu_k, **kw):
    """Per-sequence references on packed [total, H, D] tensors: out [total_q, H, D], lse [H, total_q]."""
    dtype = kw.get("dtype", torch.float64)
    out = torch.zeros(q.shape, dtype=dtype, device=q.device)
    lse = torch.full((q.shape[1], q.shape[0]), float("-inf"), dtype=dtype, device=q.device)
    for b in range(len(cu_q) - 1):
        (q0, q1), (k0, k1) = cu_q[b:b + 2].tolist(), cu_k[b:b + 2].tolist()
        if q1 == q0:
            continue
        if k1 == k0:                                       # nothing to attend: 0 (and LSE -inf)
            continue
        seq = [t[a:z].transpose(0, 1)[None] for t, a, z in ((q, q0, q1), (k, k0, k1), (v, k0, k1))]
        o, l = reference(*seq, batch0=b, **kw)
        out[q0:q1] = o[0].transpose(0, 1)
        if l is not None:
            lse[:, q0:q1] = l[0]
    return out, (lse if kw.get("activation", "softmax") == "softmax" else None)


@pytest.mark.parametrize("kw", [dict(), dict(causal=True), dict(window=(30, 10), softcap=4.0),
                                dict(causal=True, score_mod=alibi), dict(activation="silu", causal=True)],
                         ids=["plain", "causal", "window-softcap", "score_mod", "silu"])
def test_varlen(kw):
    cu_q = torch.tensor([0, 100, 100, 300, 317, 400], dtype=torch.int32)   # an empty query sequence
    cu_k = torch.tensor([0, 130, 200, 350, 350, 420], dtype=torch.int32)   # and an empty key sequence
    q, k, v = randn(400, 2, 64), randn(420, 1, 64), randn(420, 1, 64)
    out, lse = run_sim(q, k, v, layout="thd", cu_seqlens_q=cu_q, cu_seqlens_k=cu_k, **kw)
    ref_kw = dict(kw, score_mod=alibi_ref) if "score_mod" in kw else kw
    ref, ref_lse = varlen_reference(q, k, v, cu_q, cu_k, **ref_kw)
    check(out, lse, ref, ref_lse)
    assert torch.all(out[300:317] == 0)                    # the sequence with no keys


@pytest.mark.parametrize("cfg", [attention.Config(SKIP_DEAD=True, PINGPONG=True),
                                 attention.Config(BM=192, STAGES=2, PIPELINE=True, PINGPONG=True, SKIP_DEAD=True)],
                         ids=["two-consumers", "three-consumers"])
def test_varlen_skip_dead(cfg):
    """SKIP_DEAD with packed sequences of 100, 0, 217, 17 and 66 queries: consumers whose rows lie past their own
    sequence's end (17 queries: one of two; 217 on 192-row tiles: two of three in the second tile) pass the
    blocks on; the empty query sequence and the one with no keys still give 0 and LSE -inf."""
    cu_q = torch.tensor([0, 100, 100, 317, 334, 400], dtype=torch.int32)
    cu_k = torch.tensor([0, 130, 200, 350, 350, 420], dtype=torch.int32)
    q, k, v = randn(400, 2, 64), randn(420, 1, 64), randn(420, 1, 64)
    out, lse = run_sim(q, k, v, cfg, layout="thd", cu_seqlens_q=cu_q, cu_seqlens_k=cu_k, causal=True)
    check(out, lse, *varlen_reference(q, k, v, cu_q, cu_k, causal=True))


def test_varlen_d128_bf16_pingpong():
    cu_q = torch.tensor([0, 64, 200], dtype=torch.int32)
    cu_k = torch.tensor([0, 90, 160], dtype=torch.int32)
    q, k, v = (torch.randn(n, h, 128, dtype=torch.bfloat16) for n, h in ((200, 2), (160, 2), (160, 2)))
    out, lse = run_sim(q, k, v, attention.Config(PINGPONG=True), layout="thd", cu_seqlens_q=cu_q,
                       cu_seqlens_k=cu_k, causal=True)
    check(out, lse, *varlen_reference(q, k, v, cu_q, cu_k, causal=True))


# -- compile reports -------------------------------------------------------------------------------------

NAMED_IDS = re.compile(r"\bbar(?:rier)?\.(?:sync|arrive)(?:\.aligned)?\s+(\d+)\s*,")


def compile_variant(D=128, pingpong=False, varlen=False, pipeline=False, persistent=False, **kw):
    if varlen:
        q, k = torch.empty(300, 2, D, dtype=F16), torch.empty(280, 1, D, dtype=F16)
        cu = dict(cu_seqlens_q=torch.tensor([0, 100, 300], dtype=torch.int32),
                  cu_seqlens_k=torch.tensor([0, 130, 280], dtype=torch.int32))
    else:
        q, k, cu = torch.empty(1, 2, 256, D, dtype=F16), torch.empty(1, 1, 256, D, dtype=F16), {}
    features = attention.Features(**kw)
    lse = torch.empty(1024) if features.activation == "softmax" else None
    cfg = attention.Config(BN=64 if D > 128 else 128, PINGPONG=pingpong, PIPELINE=pipeline, STAGES=3 if pipeline else 2,
                           PERSISTENT=persistent)
    args, _, meta, cfg = attention.launch_args(q, k, k, torch.empty_like(q), lse, 0.125, "thd" if varlen else "bhsd",
                                               cfg, features, max_seqlen_q=200, **cu)
    return tlx.compile(attention.attention_fwd_kernel, *args, num_warps=cfg.num_warps, **meta)


@pytest.mark.parametrize("kw", [
    dict(window=(100, 30), pingpong=True), dict(causal=True, window=(64, None), D=256), dict(softcap=20.0, D=64),
    dict(score_mod=alibi, causal=True, pingpong=True), dict(mask_mod=every_third), dict(activation="gelu"),
    dict(varlen=True, causal=True, softcap=5.0), dict(varlen=True, D=256, window=(70, 20), activation="silu"),
    dict(pipeline=True), dict(pipeline=True, D=64, causal=True, softcap=20.0), dict(persistent=True, causal=True),
    dict(persistent=True, pipeline=True), dict(pipeline=True, pingpong=True, causal=True)],
    ids=["window-pp", "causal-window-d256", "softcap-d64", "score_mod-pp", "mask_mod", "gelu", "varlen-pp",
         "varlen-d256-silu", "pipeline", "pipeline-d64-causal-softcap", "persistent-causal", "persistent-pipeline", "pipeline-pingpong-causal"])
def test_compile_report(kw):
    report = compile_variant(**kw)
    s = report.stats
    assert s["wgmma"] > 0 and s["tma_load"] >= 4 and s["spills"] == 0 and not s["wgmma_serialized"] and not s["wgmma_desc_unset"]
    assert s["tma_store"] >= 2
    pingpong_ids = set(NAMED_IDS.findall(report.asm["ptx"])) & {"8", "9"}   # ids 0-3: the compiler's own
    assert pingpong_ids == ({"8", "9"} if kw.get("pingpong") else set())


# -- input errors ----------------------------------------------------------------------------------------

def q4(*shape, dtype=F16):
    return torch.empty(*shape, dtype=dtype)


CU = torch.tensor([0, 128], dtype=torch.int32)
BAD_INPUTS = [
    (dict(q=q4(1, 2, 128, 96), k=q4(1, 2, 128, 96), v=q4(1, 2, 128, 96)), "head dim must be 64, 128 or 256, got 96"),
    (dict(q=q4(1, 2, 128, 64, dtype=torch.float32)), "must all be float16 or bfloat16"),
    (dict(k=q4(1, 3, 128, 64), v=q4(1, 3, 128, 64)), r"query heads \(2\) must be a multiple of key/value heads \(3\)"),
    (dict(q=q4(1, 2, 100, 64), k=q4(1, 2, 100, 64), v=q4(1, 2, 100, 64)), "multiple of 128, got 100"),
    (dict(window=(3,)), "'window' must be None or \\(left, right\\)"),
    (dict(window=(-1, 4)), "'window' must be None or \\(left, right\\)"),
    (dict(softcap=-1.0), "'softcap' must be None or a positive number"),
    (dict(scale=-0.5), r"'scale' must be >= 0 for softmax attention, got -0.5"),
    (dict(activation="relu"), "'activation' must be one of"),
    (dict(score_mod=lambda s, b, h, i, j: s), "'score_mod' must be a @tlx.jit function"),
    (dict(layout="sbhd"), "'layout' must be one of"),
    (dict(cu_seqlens_q=CU, cu_seqlens_k=CU), "need layout='thd'"),
    (dict(layout="thd", q=q4(128, 2, 64), k=q4(128, 2, 64), v=q4(128, 2, 64), cu_seqlens_q=CU),
     "'cu_seqlens_k' must be given for layout 'thd'"),
    (dict(layout="thd", q=q4(128, 2, 64), k=q4(128, 2, 64), v=q4(128, 2, 64), cu_seqlens_q=CU.long(),
          cu_seqlens_k=CU), "'cu_seqlens_q' must be a 1-D int32 tensor"),
    (dict(q=q4(1, 2, 128, 64, dtype=torch.bfloat16)), "must all be float16 or bfloat16, got torch.bfloat16"),
    (dict(scale="0.1"), "'scale' must be None or a number"),
]


@pytest.mark.parametrize("kw,msg", BAD_INPUTS, ids=range(len(BAD_INPUTS)))
def test_bad_inputs(kw, msg):
    args = dict(q=q4(1, 2, 128, 64), k=q4(1, 2, 128, 64), v=q4(1, 2, 128, 64))
    args.update(kw)
    with pytest.raises(ValueError, match=msg):
        tlx.ops.attention(**args)
    with pytest.raises(ValueError, match=msg):
        attention.attention(**args, backend="sim")


@pytest.mark.parametrize("cu_q,msg", [([0, 200, 100], "'cu_seqlens_q' must rise monotonically"),
                                      ([1, 100, 128], "'cu_seqlens_q' must rise monotonically from 0"),
                                      ([0, 64, 100], "to the packed length 128")])
def test_bad_cu_seqlens_values(cu_q, msg):
    q = q4(128, 2, 64)
    with pytest.raises(ValueError, match=msg):
        attention.attention(q, q, q, layout="thd", cu_seqlens_q=torch.tensor(cu_q, dtype=torch.int32),
                            cu_seqlens_k=torch.tensor([0, 64, 128], dtype=torch.int32), backend="sim")


def test_config_and_causal_types():
    q = q4(1, 2, 128, 64)
    with pytest.raises(ValueError, match="'causal' must be True or False, got 'no'"):   # would have read as True
        attention.attention(q, q, q, causal="no", backend="sim")
    with pytest.raises(ValueError, match="'config' must be None or an attention.Config, got 'fast'"):
        attention.attention(q, q, q, config="fast", backend="sim")


def test_shared_memory_refused_by_name():
    """A ring, Q and output buffer over one block's shared memory is refused before the compiler's allocation
    error (256-key blocks at head dim 128 need 320 KB)."""
    q = q4(1, 2, 512, 128)
    with pytest.raises(attention.ConfigRejected, match=r"BN=256 with STAGES=2, O_BUFFER=True needs 327680 bytes"):
        attention.attention(q, q, q, config=attention.Config(BN=256, PERSISTENT=True, O_BUFFER=True), backend="sim")


def test_strided_cu_seqlens_refused():
    """A strided view of prefix sums is refused (the kernel read every entry at unit stride: NaN outputs)."""
    q = q4(300, 2, 64)
    cu = torch.tensor([0, 0, 100, 100, 300, 300], dtype=torch.int32)[::2]
    with pytest.raises(ValueError, match="'cu_seqlens_q' must be contiguous, got stride 2"):
        attention.attention(q, q, q, layout="thd", cu_seqlens_q=cu, cu_seqlens_k=cu.contiguous(), backend="sim")


@pytest.mark.parametrize("q_shape,k_shape,layout", [((0, 2, 128, 64), (0, 2, 128, 64), "bhsd"),
                                                     ((1, 0, 128, 64), (1, 0, 128, 64), "bhsd"),
                                                     ((0, 100, 2, 64), (0, 0, 2, 64), "bshd"),
                                                     ((2, 100, 2, 64), (2, 0, 2, 64), "bshd")],
                         ids=["no-batch", "no-heads", "bshd-no-batch", "bshd-no-keys"])
@pytest.mark.parametrize("activation", ["softmax", "gelu"])
def test_empty_problems(q_shape, k_shape, layout, activation):
    """Nothing to compute: an empty output, or rows that attend no key (output 0, LSE -inf), as the kernel gives
    an empty sequence of a packed batch; the poisoned `out` is written."""
    q, k = torch.randn(q_shape, dtype=F16), torch.randn(k_shape, dtype=F16)
    out = torch.full_like(q, float("nan"))
    res = attention.attention(q, k, k, layout=layout, out=out, activation=activation,
                              return_lse=activation == "softmax", backend="sim")
    o, lse = res if activation == "softmax" else (res, None)
    assert o.shape == q.shape and not o.isnan().any() and (o == 0).all()
    if lse is not None:
        B, H, S = (q.shape[0], q.shape[1], q.shape[2]) if layout == "bhsd" else (q.shape[0], q.shape[2], q.shape[1])
        assert lse.shape == (B, H, S) and (lse == float("-inf")).all()


def test_out_aliasing():
    """`out` may be q itself (each tile reads its Q rows before storing those rows); over k or v, which every
    tile reads, it is refused (the simulator gave 47% error into v)."""
    q, k, v = (torch.randn(1, 2, 256, 64, dtype=F16) for _ in range(3))
    ref, _ = reference(q, k, v)
    q_in_place = q.clone()
    out = attention.attention(q_in_place, k, v, out=q_in_place, backend="sim")
    assert out.data_ptr() == q_in_place.data_ptr() and rel_err(out, ref) <= 1e-2
    for name, t in (("k", k), ("v", v)):
        with pytest.raises(ValueError, match=f"'out' must not share memory with '{name}'"):
            attention.attention(q, k, v, out=t, backend="sim")


def test_return_lse_needs_softmax():
    q = q4(1, 2, 128, 64)
    with pytest.raises(ValueError, match="'return_lse' needs activation='softmax'"):
        attention.attention(q, q, q, activation="gelu", return_lse=True, backend="sim")


def test_op_registered_with_fake_implementation():
    from torch._subclasses.fake_tensor import FakeTensorMode
    with FakeTensorMode():
        q, k = torch.empty(2, 4, 256, 64, dtype=F16), torch.empty(2, 1, 256, 64, dtype=F16)
        assert torch.ops.tlx.attention(q, k, k, True, 16, None, None, 30.0, None, None, "softmax", "bhsd").shape \
            == q.shape
        q, k = torch.empty(300, 4, 64, dtype=torch.bfloat16), torch.empty(280, 2, 64, dtype=torch.bfloat16)
        cu = torch.empty(3, dtype=torch.int32)
        assert torch.ops.tlx.attention(q, k, k, False, None, None, 0.1, None, cu, cu, "gelu", "thd").shape == q.shape


def test_op_refuses_cpu_tensors_with_a_hint():
    q = torch.randn(1, 2, 128, 64, dtype=F16)
    with pytest.raises(ValueError, match=r"'q' must be a CUDA tensor.*backend='sim'"):
        tlx.ops.attention(q, q, q, window=(8, 8))


@pytest.mark.parametrize("D,bn,kw", [(64, 128, {}), (128, 64, dict(causal=True)), (64, 64, dict(window=(100, 50))),
                                     (128, 128, dict(softcap=20.0)), (64, 64, dict(score_mod=alibi, causal=True))],
                         ids=["plain", "causal", "window", "softcap", "score_mod"])
@pytest.mark.parametrize("stages,pingpong", [(2, False), (3, False), (3, True)], ids=["s2", "s3", "s3-pingpong"])
def test_pipelined_consumers(D, bn, kw, stages, pingpong):
    """FA3-style overlap (P V of block j-1 in flight over the softmax of block j): same results, and
    the simulator checks every wgmma wait and stage release under several schedules."""
    from tlx.sim import SimOptions
    q, k, v = randn(1, 2, 384, D), randn(1, 1, 384, D), randn(1, 1, 384, D)
    cfg = attention.Config(BN=bn, STAGES=stages, PIPELINE=True, PINGPONG=pingpong)
    out, lse = attention.attention(q, k, v, backend="sim", return_lse=True, config=cfg,
                                   sim_options=SimOptions(schedules=3), **kw)
    ref_kw = dict(kw, score_mod=alibi_ref) if "score_mod" in kw else kw
    check(out, lse, *reference(q, k, v, **ref_kw))


@pytest.mark.parametrize("cfg,kw", [
    (attention.Config(PERSISTENT=True, PROGRAMS=3), dict(causal=True)),
    (attention.Config(PERSISTENT=True, PROGRAMS=3, PINGPONG=True), dict(window=(100, 60))),
    (attention.Config(STAGES=3, PERSISTENT=True, PROGRAMS=5, PIPELINE=True), dict(softcap=20.0)),
    (attention.Config(STAGES=3, PERSISTENT=True, PROGRAMS=3, PIPELINE=True, PINGPONG=True), dict(causal=True)),
    (attention.Config(BN=64, PERSISTENT=True, PROGRAMS=2), dict(activation="gelu"))],
    ids=["causal", "window-pingpong", "pipeline-softcap", "pipeline-pingpong-causal", "gelu"])
def test_persistent_programs_walk_many_tiles(cfg, kw):
    """A few persistent programs each walk several tiles (snake order, K/V ring and Q buffers carried
    across tiles); the simulator checks every barrier phase under several schedules."""
    from tlx.sim import SimOptions
    q, k, v = randn(2, 2, 256, 64), randn(2, 1, 256, 64), randn(2, 1, 256, 64)   # 8 tiles
    out, lse = run_sim(q, k, v, cfg, sim_options=SimOptions(schedules=2), **kw)
    check(out, lse, *reference(q, k, v, **kw))


@pytest.mark.parametrize("cfg,kw", [
    (attention.Config(PERSISTENT=True, PROGRAMS=3, P_EARLY=True), dict(causal=True)),
    (attention.Config(BN=256, PERSISTENT=True, PROGRAMS=2), dict(causal=True)),
    (attention.Config(BM=192, STAGES=3, PIPELINE=True, PINGPONG=True), dict(causal=True)),
    (attention.Config(BN=256, PINGPONG=True), dict(window=(100, 30), softcap=20.0)),
    (attention.Config(), dict(window=(None, 70)))],
    ids=["persistent-causal", "bn256-causal", "three-consumers-causal", "window-softcap", "right-window"])
def test_half_diagonal_blocks(cfg, kw):
    """HALF_DIAGONAL: a consumer whose rows attend only the first half of its last block computes it at
    BN // 2 keys; same results, and every stage is still waited for and released (several schedules)."""
    from dataclasses import replace
    from tlx.sim import SimOptions
    S = 384 if cfg.BM == 192 else 512
    q, k, v = randn(1, 2, S, 64), randn(1, 1, S, 64), randn(1, 1, S, 64)
    out, lse = run_sim(q, k, v, replace(cfg, HALF_DIAGONAL=True), sim_options=SimOptions(schedules=2), **kw)
    check(out, lse, *reference(q, k, v, **kw))


def test_half_diagonal_varlen():
    """HALF_DIAGONAL where a sequence ends inside the half block (its last key bounds the half, not the
    causal diagonal)."""
    cu_q = torch.tensor([0, 100, 300, 317, 400], dtype=torch.int32)
    cu_k = torch.tensor([0, 130, 290, 350, 420], dtype=torch.int32)
    q, k, v = randn(400, 2, 64), randn(420, 1, 64), randn(420, 1, 64)
    out, lse = run_sim(q, k, v, attention.Config(HALF_DIAGONAL=True), layout="thd", cu_seqlens_q=cu_q,
                       cu_seqlens_k=cu_k, causal=True)
    check(out, lse, *varlen_reference(q, k, v, cu_q, cu_k, causal=True))


def test_half_diagonal_needs_wide_blocks():
    with pytest.raises(tlx.ConfigRejected, match=r"HALF_DIAGONAL needs BN >= 128 .*got BN=64"):
        attention.Config(BN=64, HALF_DIAGONAL=True)


def test_persistent_needs_fixed_lengths():
    q = randn(300, 2, 64)
    cu = torch.tensor([0, 100, 300], dtype=torch.int32)
    with pytest.raises(tlx.ConfigRejected, match=r"'PERSISTENT' needs fixed lengths"):
        attention.attention(q, q, q, layout="thd", cu_seqlens_q=cu, cu_seqlens_k=cu, backend="sim",
                            config=attention.Config(PERSISTENT=True))


def test_pipeline_config_needs_two_stages():
    with pytest.raises(tlx.ConfigRejected, match=r"PIPELINE needs STAGES >= 2, got STAGES=1"):
        attention.Config(STAGES=1, PIPELINE=True)


def test_three_consumer_tile_limits():
    """BM is 128 or 192; 192 (three consumers at 160 registers) needs D=64; an explicit BN must divide
    a fixed length, even where the default's blocks would."""
    with pytest.raises(tlx.ConfigRejected, match=r"BM must be 128 \(two consumers\) or 192 \(three\), got 256"):
        attention.Config(BM=256)
    q = randn(1, 2, 256, 128)
    with pytest.raises(tlx.ConfigRejected, match=r"BM=192 .* needs head dim 64, got 128"):
        attention.attention(q, q, q, backend="sim", config=attention.Config(BM=192))
    q = randn(1, 2, 384, 64)
    with pytest.raises(tlx.ConfigRejected, match=r"multiples of 64 \(queries\) and BN=256 \(keys\), got 384/384"):
        attention.attention(q, q, q, backend="sim", config=attention.Config(BN=256))


@pytest.mark.parametrize("S,Sk,causal", [(200, 200, True), (136, 264, False)])
def test_bshd_any_length(S, Sk, causal):
    """[B, S, H, D] with lengths that are not block multiples (or differ) runs as packed sequences."""
    q = randn(2, 2, S, 64)
    k, v = randn(2, 2, Sk, 64), randn(2, 2, Sk, 64)
    to_bshd = lambda t: t.transpose(1, 2).contiguous()   # noqa: E731
    out, lse = attention.attention(to_bshd(q), to_bshd(k), to_bshd(v), causal=causal, layout="bshd",
                                   backend="sim", return_lse=True)
    ref, ref_lse = reference(q, k, v, causal=causal)
    check(out.transpose(1, 2), lse, ref, ref_lse)


def test_zero_scale_is_uniform_attention():
    """scale 0 on the plain path (row max of raw scores times 0): every key weighs the same."""
    q, k, v = randn(1, 2, 256, 64), randn(1, 2, 256, 64), randn(1, 2, 256, 64)
    out, lse = run_sim(q, k, v, scale=0.0)
    check(out, lse, *reference(q, k, v, scale=1e-30))


def test_persistent_double_buffers_q_where_shared_memory_allows():
    """Two Q buffers per consumer when persistent and beside the K/V ring in shared memory; else one."""
    C = attention.Config
    assert attention.q_buffers(C(BN=256, PERSISTENT=True), 64, 2) == 2
    assert attention.q_buffers(C(PERSISTENT=True), 128, 2) == 2
    assert attention.q_buffers(C(BM=192, STAGES=3, PIPELINE=True, PERSISTENT=True), 64, 2) == 2
    assert attention.q_buffers(C(STAGES=3, PIPELINE=True, PERSISTENT=True), 128, 2) == 1
    assert attention.q_buffers(C(BN=64, PERSISTENT=True), 256, 2) == 1
    assert attention.q_buffers(C(), 64, 2) == 1                                              # one tile per program


@pytest.mark.parametrize("D,cfg,features", [
    (64, attention.Config(BN=256, PERSISTENT=True), attention.Features()),
    (128, attention.Config(PERSISTENT=True, PINGPONG=True), attention.Features()),
    (64, attention.Config(PERSISTENT=True), attention.Features(causal=True)),
    (128, attention.Config(PERSISTENT=True, PIPELINE=True, PINGPONG=True), attention.Features(causal=True)),
    (64, attention.Config(BM=192, STAGES=3, PIPELINE=True, PINGPONG=True, PERSISTENT=True),
     attention.Features(window=(300, 100))),
    (128, attention.Config(PERSISTENT=True, PINGPONG=True, O_BUFFER=True), attention.Features(causal=True))],
    ids=["d64", "d128", "d64-causal", "d128-causal-pipeline", "d64-b192-window", "d128-causal-obuffer"])
def test_double_buffered_q_compiles_without_unset_descriptors(D, cfg, features):
    """The two-Q-buffer builds, masked edges included: no HGMMA reads a descriptor register that some
    path leaves unset (the ptxas hazard that broke the causal build before the edge loops indexed Q
    through the opaque zero)."""
    q, k, v = (torch.randn(1, 2, 768, D, dtype=torch.bfloat16) for _ in range(3))
    o, lse = torch.empty_like(q), torch.empty(1, 2, 768)
    args, _, meta, _ = attention.launch_args(q, k, v, o, lse, D ** -0.5, "bhsd", cfg, features)
    assert meta["Q_BUFS"] == 2
    s = tlx.compile(attention.attention_fwd_kernel, *args, num_warps=4, **meta).stats
    assert s["wgmma_desc_unset"] == 0 and s["spills"] == 0 and not s["wgmma_serialized"]


@pytest.mark.parametrize("D,S,causal", [(256, 2048, False), (256, 2048, True), (256, 8192, True), (128, 4096, True),
                                        (128, 16384, True), (64, 4096, False), (64, 8192, True), (64, 1024, True)])
def test_default_configs_compile_clean(D, S, causal):
    """Each branch of default_config (RELEASE_K_EARLY, skipped blocks, persistent, three consumers, BALANCED
    tiles with and without a DYNAMIC tail) compiles for sm_90a with wgmma and TMA, without spills,
    serialized wgmmas or unset descriptors."""
    cfg = attention.default_config(D, S, causal)
    q, k, v = (torch.randn(1, 2, 768, D, dtype=torch.bfloat16) for _ in range(3))
    o, lse = torch.empty_like(q), torch.empty(1, 2, 768)
    args, _, meta, _ = attention.launch_args(q, k, v, o, lse, D ** -0.5, "bhsd", cfg, attention.Features(causal=causal))
    s = tlx.compile(attention.attention_fwd_kernel, *args, num_warps=4, **meta).stats
    assert s["wgmma"] > 0 and s["tma_load"] >= 4 and s["setmaxnreg"] > 0
    assert s["spills"] == 0 and not s["wgmma_serialized"] and s["wgmma_desc_unset"] == 0


def _attention_sass(cfg: attention.Config, D: int) -> list[str]:
    """The SASS instructions of the attention kernel built with `cfg` (bhsd, 512 keys, no features)."""
    from tlx.gluon import sass
    q, k, v = (torch.randn(1, 2, 512, D, dtype=torch.bfloat16) for _ in range(3))
    o, lse = torch.empty_like(q), torch.empty(1, 2, 512)
    args, _, meta, _ = attention.launch_args(q, k, v, o, lse, D ** -0.5, "bhsd", cfg, attention.Features())
    instrs, _ = sass.parse(sass.disassemble(tlx.compile(attention.attention_fwd_kernel, *args, num_warps=4,
                                                        **meta).asm["cubin"]))
    return [i.text for i in instrs]


def _pv_wait_overlap(cfg: attention.Config, D: int) -> int:
    """MUFU.EX2 instructions between a consumer's first wait for Q K^T (one wgmma group left in
    flight) and its next full wait (P V done): the exps that overlap the P V wgmma."""
    ops = _attention_sass(cfg, D)
    first = next(n for n, t in enumerate(ops) if t.startswith("WARPGROUP.DEPBAR") and t.endswith("0x1"))
    full = next(n for n in range(first + 1, len(ops)) if ops[n].startswith("WARPGROUP.DEPBAR"))
    return sum(t.startswith("MUFU.EX2") for t in ops[first:full])


@pytest.mark.parametrize("D", [64, 128])
def test_pin_wait_keeps_the_softmax_before_the_pv_wait(D):
    """PIPELINE's point is the softmax of block j running while P V of block j-1 is on the tensor
    cores. ptxas 12.8 hoists the P V wait above the exps (it depends on nothing they compute);
    PIN_WAIT's shared-memory store of the row sums keeps a thread's share of the 64 x 128 score tile
    (64 exps, plus two for the rescale factors) before it."""
    assert _pv_wait_overlap(attention.Config(STAGES=3, PIPELINE=True), D) < 8
    assert _pv_wait_overlap(attention.Config(STAGES=3, PIPELINE=True, PIN_WAIT=True), D) >= 64


def _exp_to_pv_path(cfg: attention.Config, D: int) -> int:
    """The longest stretch of SASS instructions from a consumer's last exp to the P V wgmma (the first
    HGMMA with P, a register operand) after it: the tail of the Q K^T -> P V critical path."""
    ops = _attention_sass(cfg, D)
    pv = [n for n, t in enumerate(ops) if t.startswith("HGMMA") and "gdesc" not in t.split(",")[1]
          and not ops[n - 1].startswith("HGMMA")]
    return max(n - max(m for m in range(n) if ops[m].startswith("MUFU.EX2")) for n in pv)


@pytest.mark.parametrize("D", [64, 128])
def test_p_early_shortens_the_exp_to_pv_path(D):
    """P_EARLY converts P to 16 bits before the V wait; ptxas otherwise leaves every conversion
    between the last exp and the P V issue."""
    assert _exp_to_pv_path(attention.Config(P_EARLY=True), D) < _exp_to_pv_path(attention.Config(), D)


@pytest.mark.parametrize("S,causal", [(4096, False), (16384, True)], ids=["persistent", "grid-causal"])
def test_q_in_regs_takes_q_from_registers(S, causal):
    """Q_IN_REGS (the plain D=128 defaults): every wgmma of the pipelined loop, Q K^T included, takes its A
    operand from registers, with no spills; without it Q K^T reads Q from shared memory (descriptor A)."""
    from dataclasses import replace
    cfg = attention.default_config(128, S, causal)
    assert cfg.Q_IN_REGS
    hgmma = [t for t in _attention_sass(cfg, 128) if t.startswith("HGMMA")]
    assert hgmma and not any("gdesc" in t.split(",")[1] for t in hgmma)
    assert any("gdesc" in t.split(",")[1] for t in _attention_sass(replace(cfg, Q_IN_REGS=False), 128)
               if t.startswith("HGMMA"))


def test_cluster_attention_compiles_with_multicast_loads_and_remote_arrives():
    """CLUSTER=2 on the plain D=128 default through the Gluon lowering and the PTX pass: each K and V box
    (one per rank) is a multicast TMA load (mask 0b11), each of the pipelined loop's four stage releases
    also arrives on the other CTA's barrier (without a second warp-group bar.sync: the same named-barrier
    count as CLUSTER=1), every task opens and closes with a cluster barrier, and ptxas takes it without
    spills."""
    import re
    from dataclasses import replace

    from tlx.gluon import sass
    q, k, v = (torch.randn(1, 2, 4096, 128, dtype=torch.bfloat16) for _ in range(3))
    o, lse = torch.empty_like(q), torch.empty(1, 2, 4096)
    stats = {}
    for cluster in (1, 2):
        cfg = replace(attention.default_config(128, 4096), CLUSTER=cluster, PROGRAMS=132)
        args, _, meta, _ = attention.launch_args(q, k, v, o, lse, 0.1, "bhsd", cfg, attention.Features())
        kernel = tlx.compile(attention.attention_fwd_kernel, *args, num_warps=4, **meta)
        stats[cluster] = kernel.stats
    # per consumer replica (each compiled apart): four releases; K and V one box per rank
    assert (stats[2]["multicast_load"], stats[2]["remote_arrive"], stats[2]["cluster_barrier"]) == (4, 8, 6)
    assert re.findall(r"\.multicast::cluster [^;]*, 3;", kernel.asm["ptx"]) and stats[1]["multicast_load"] == 0
    sass_ops = [i.text for i in sass.parse(sass.disassemble(kernel.asm["cubin"]))[0]]
    assert sum("UTMALDG.2D.MULTICAST" in t for t in sass_ops) == 4
    assert stats[2]["spills"] == 0 and stats[2]["wgmma"] == stats[1]["wgmma"] and not stats[2]["wgmma_desc_unset"]
    assert stats[2]["named_barrier"] == stats[1]["named_barrier"]
