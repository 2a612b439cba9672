"""Attention forward on the GPU against a float32 reference: fresh random data, poisoned outputs."""
from dataclasses import replace

import pytest
import torch
import torch.nn.functional as F

from tlx.kernels import attention


def rel_err(out, ref):
    return ((out.float() - ref).norm() / ref.norm()).item()


@pytest.mark.parametrize("pingpong", [False, True], ids=["coop", "pingpong"])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=str)
@pytest.mark.parametrize("D,S,causal,layout,hkv", [
    (64, 1024, False, "bhsd", 8), (64, 2048, True, "bhsd", 2), (128, 1024, True, "bshd", 8),
    (128, 4096, False, "bhsd", 1), (256, 1024, False, "bhsd", 4), (256, 2048, True, "bshd", 8)])
def test_attention_matches_reference(dtype, D, S, causal, layout, hkv, pingpong):
    B, H = 2, 8
    q = torch.randn(B, H, S, D, device="cuda", dtype=dtype)
    k = torch.randn(B, hkv, S, D, device="cuda", dtype=dtype)
    v = torch.randn(B, hkv, S, D, device="cuda", dtype=dtype)
    to_layout = (lambda t: t.transpose(1, 2).contiguous()) if layout == "bshd" else (lambda t: t)
    cfg = attention.Config(BN=64 if D > 128 else 128, PINGPONG=pingpong)
    o, lse = attention.attention(to_layout(q), to_layout(k), to_layout(v), causal=causal, layout=layout,
                                 return_lse=True, config=cfg)
    torch.cuda.synchronize()
    o = o.transpose(1, 2) if layout == "bshd" else o
    kr, vr = k.repeat_interleave(H // hkv, 1).float(), v.repeat_interleave(H // hkv, 1).float()
    ref = F.scaled_dot_product_attention(q.float(), kr, vr, is_causal=causal)
    assert not torch.isnan(o).any()
    assert rel_err(o, ref) <= 1e-2
    scores = (q.float() @ kr.transpose(-1, -2)) / D ** 0.5
    if causal:
        scores = scores.masked_fill(torch.ones(S, S, device="cuda", dtype=torch.bool).triu(1), float("-inf"))
    assert rel_err(lse, torch.logsumexp(scores, -1)) <= 1e-3


# -- features (issue 5): fresh random data, poisoned outputs, float32 references with explicit masks ------

from tests.test_attention_features import (alibi, alibi_ref, every_third, every_third_ref, reference,  # noqa: E402
                                           varlen_reference)

import tlx.ops  # noqa: E402


def run_gpu(q, k, v, config=None, **kw):
    out = torch.full_like(q, float("nan"))
    lse_wanted = kw.get("activation", "softmax") == "softmax"
    res = attention.attention(q, k, v, config=config, out=out, return_lse=lse_wanted, **kw)
    torch.cuda.synchronize()
    return res if lse_wanted else (res, None)


def check_gpu(out, lse, ref, ref_lse):
    assert not torch.isnan(out).any()
    assert rel_err(out, ref) <= 1e-2
    if ref_lse is not None:
        finite = torch.isfinite(ref_lse)
        assert torch.equal(torch.isinf(lse), ~finite)
        assert rel_err(lse[finite], ref_lse[finite]) <= 1e-3


def rand(*shape, dtype=torch.bfloat16):
    return torch.randn(*shape, device="cuda", dtype=dtype)


@pytest.mark.parametrize("pingpong", [False, True], ids=["coop", "pingpong"])
@pytest.mark.parametrize("D,window,causal", [(64, (256, 256), False), (128, (512, None), True),
                                             (128, (None, 100), False), (256, (300, 0), False), (64, (0, 0), False)])
def test_sliding_window(D, window, causal, pingpong):
    B, H, S = 2, 4, 2048
    q, k, v = rand(B, H, S, D), rand(B, 2, S, D), rand(B, 2, S, D)
    cfg = attention.Config(BN=64 if D > 128 else 128, PINGPONG=pingpong)
    out, lse = run_gpu(q, k, v, cfg, causal=causal, window=window)
    check_gpu(out, lse, *reference(q, k, v, causal=causal, window=window, dtype=torch.float32))


@pytest.mark.parametrize("hkv", [1, 2], ids=["mqa", "gqa"])
@pytest.mark.parametrize("layout", ["bhsd", "bshd"])
def test_gqa_mqa(hkv, layout):
    B, H, S, D = 2, 8, 1024, 128
    q, k, v = rand(B, H, S, D), rand(B, hkv, S, D), rand(B, hkv, S, D)
    t = (lambda x: x.transpose(1, 2).contiguous()) if layout == "bshd" else (lambda x: x)
    out, lse = run_gpu(t(q), t(k), t(v), causal=True, layout=layout)
    ref, ref_lse = reference(q, k, v, causal=True, dtype=torch.float32)
    check_gpu(out.transpose(1, 2) if layout == "bshd" else out, lse, ref, ref_lse)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=str)
@pytest.mark.parametrize("causal", [False, True])
def test_softcap(dtype, causal):
    q, k, v = rand(2, 4, 1024, 128, dtype=dtype) * 2, rand(2, 4, 1024, 128, dtype=dtype), rand(2, 4, 1024, 128,
                                                                                               dtype=dtype)
    out, lse = run_gpu(q, k, v, causal=causal, softcap=20.0)
    check_gpu(out, lse, *reference(q, k, v, causal=causal, softcap=20.0, dtype=torch.float32))


@pytest.mark.parametrize("pingpong", [False, True], ids=["coop", "pingpong"])
def test_score_mod_and_mask_mod(pingpong):
    q, k, v = rand(2, 4, 1024, 64), rand(2, 4, 1024, 64), rand(2, 4, 1024, 64)
    cfg = attention.Config(PINGPONG=pingpong)
    out, lse = run_gpu(q, k, v, cfg, causal=True, score_mod=alibi)
    check_gpu(out, lse, *reference(q, k, v, causal=True, score_mod=alibi_ref, dtype=torch.float32))
    out, lse = run_gpu(q, k, v, cfg, mask_mod=every_third)
    check_gpu(out, lse, *reference(q, k, v, mask_mod=every_third_ref, dtype=torch.float32))


@pytest.mark.parametrize("activation", ["gelu", "silu"])
@pytest.mark.parametrize("causal", [False, True])
def test_activation(activation, causal):
    q, k, v = rand(2, 4, 1024, 128), rand(2, 4, 1024, 128), rand(2, 4, 1024, 128)
    out, _ = run_gpu(q, k, v, causal=causal, activation=activation, scale=0.02)
    check_gpu(out, None, *reference(q, k, v, causal=causal, activation=activation, scale=0.02, dtype=torch.float32))


@pytest.mark.parametrize("D", [64, 128, 256])
@pytest.mark.parametrize("kw", [dict(), dict(causal=True), dict(window=(200, 50), softcap=10.0),
                                dict(activation="silu", scale=0.02)], ids=["plain", "causal", "window", "silu"])
def test_varlen(D, kw):
    lens_q, lens_k = [1, 300, 0, 1000, 129, 64], [5, 300, 17, 900, 0, 1500]
    cu_q = torch.tensor([0] + lens_q, device="cuda").cumsum(0).to(torch.int32)
    cu_k = torch.tensor([0] + lens_k, device="cuda").cumsum(0).to(torch.int32)
    q = rand(int(cu_q[-1]), 8, D)
    k, v = rand(int(cu_k[-1]), 2, D), rand(int(cu_k[-1]), 2, D)
    cfg = attention.Config(BN=64 if D > 128 else 128)
    out, lse = run_gpu(q, k, v, cfg, layout="thd", cu_seqlens_q=cu_q, cu_seqlens_k=cu_k, **kw)
    check_gpu(out, lse, *varlen_reference(q, k, v, cu_q, cu_k, dtype=torch.float32, **kw))


def test_torch_op_and_compile():
    q, k, v = rand(2, 8, 1024, 128), rand(2, 2, 1024, 128), rand(2, 2, 1024, 128)
    out = tlx.ops.attention(q, k, v, causal=True, window=(256, None), softcap=30.0)
    ref, _ = reference(q, k, v, causal=True, window=(256, None), softcap=30.0, dtype=torch.float32)
    assert rel_err(out, ref) <= 1e-2
    compiled = torch.compile(lambda a, b, c: tlx.ops.attention(a, b, c, causal=True, window=(256, None),
                                                               softcap=30.0), fullgraph=True)
    assert rel_err(compiled(q, k, v), ref) <= 1e-2


@pytest.mark.parametrize("pingpong", [False, True], ids=["coop", "pingpong"])
@pytest.mark.parametrize("D,bn,stages,causal", [(64, 128, 3, False), (128, 128, 3, True), (128, 64, 2, False),
                                                (256, 64, 2, True)])
def test_pipelined_consumers_gpu(D, bn, stages, causal, pingpong):
    """Config(PIPELINE=True): FA3-style softmax/wgmma overlap, on the GPU against an fp32 reference."""
    q, k, v = (torch.randn(2, 8, 2048, D, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    cfg = attention.Config(BN=bn, STAGES=stages, PIPELINE=True, PINGPONG=pingpong)
    o = attention.attention(q, k, v, causal=causal, config=cfg)
    torch.cuda.synchronize()
    ref = F.scaled_dot_product_attention(q.float(), k.float(), v.float(), is_causal=causal)
    assert not torch.isnan(o).any() and rel_err(o, ref) <= 1e-2


@pytest.mark.parametrize("lean", [False, True], ids=["", "lean"])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("D,S", [(64, 2048), (64, 1152), (64, 8192), (128, 1024), (128, 2048), (128, 8192), (256, 1024),
                                 (256, 8192)])
def test_default_config_matches_reference(D, S, causal, lean):
    """The configuration attention() picks by itself (persistent and grid, two and three consumers,
    RELEASE_K_EARLY; D=64's 256-key tiles run in the P_EARLY, LAZY_RESCALE and POLY_EXP2 tests), writing
    into a poisoned output; `lean`: the same with LEAN_SYNC, launched three times."""
    B, H = 2, 4
    q, k, v = (torch.randn(B, H, S, D, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    ref = F.scaled_dot_product_attention(q.float(), k.float(), v.float(), is_causal=causal)
    cfg = replace(attention.default_config(D, S, causal), LEAN_SYNC=True) if lean else None
    for _ in range(3 if lean else 1):
        out = torch.full_like(q, float("nan"))
        attention.attention(q, k, v, causal=causal, out=out, config=cfg)
        torch.cuda.synchronize()
        assert not torch.isnan(out).any()
        assert rel_err(out, ref) <= 1e-2


@pytest.mark.parametrize("D,S,causal", [(64, 1024, False), (64, 2048, True), (128, 4096, False), (128, 2048, True),
                                        (256, 1024, False)])
def test_in_place_output(D, S, causal):
    """out=q: the defaults (persistent, a second Q buffer loading the next tile, two-CTA clusters at D=128) store
    each tile's rows only after that tile's Q has landed, and no other tile reads them."""
    B, H = 2, 4
    q, k, v = (torch.randn(B, H, S, D, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    ref = F.scaled_dot_product_attention(q.float(), k.float(), v.float(), is_causal=causal)
    out = attention.attention(q, k, v, causal=causal, out=q)
    torch.cuda.synchronize()
    assert out.data_ptr() == q.data_ptr() and rel_err(out, ref) <= 1e-2


@pytest.mark.parametrize("D,kw", [(128, dict(causal=True, window=(300, 0))), (64, dict(window=(256, 256))),
                                  (128, dict(softcap=30.0, causal=True)), (64, dict(activation="gelu", scale=0.02)),
                                  (256, dict(causal=True))])
def test_lean_sync_features_gpu(D, kw):
    """LEAN_SYNC on feature kernels (masked edge blocks, softcap, activations) with GQA, three launches."""
    B, H, S = 2, 8, 1536
    q, k, v = rand(B, H, S, D), rand(B, 2, S, D), rand(B, 2, S, D)
    ref, ref_lse = reference(q, k, v, dtype=torch.float32, **kw)
    cfg = replace(attention.default_config(D, S, kw.get("causal", False), plain=False), LEAN_SYNC=True)
    for _ in range(3):
        out, lse = run_gpu(q, k, v, cfg, **kw)
        check_gpu(out, lse, ref, ref_lse)


@pytest.mark.parametrize("D,S,kw", [(64, 1024, dict(causal=True)), (64, 2048, dict(causal=True)),
                                    (128, 1024, dict(causal=True)), (64, 4096, dict(causal=True)),
                                    (64, 8192, dict(causal=True)), (128, 1536, dict(window=(300, 40))),
                                    (64, 1536, dict(causal=True, softcap=30.0))])
def test_half_diagonal_gpu(D, S, kw):
    """HALF_DIAGONAL on the causal defaults (two and three consumers, 128- and 256-key blocks, persistent
    and grid), a right window and softcap, with GQA: three launches into poisoned outputs."""
    B, H = 2, 8
    q, k, v = rand(B, H, S, D), rand(B, 2, S, D), rand(B, 2, S, D)
    ref, ref_lse = reference(q, k, v, dtype=torch.float32, **kw)
    plain = set(kw) == {"causal"}
    cfg = replace(attention.default_config(D, S, kw.get("causal", False), plain=plain), HALF_DIAGONAL=True)
    for _ in range(3):
        out, lse = run_gpu(q, k, v, cfg, **kw)
        check_gpu(out, lse, ref, ref_lse)


@pytest.mark.parametrize("pingpong", [False, True], ids=["coop", "pingpong"])
@pytest.mark.parametrize("D,S,causal", [(64, 1024, True), (128, 2048, False), (128, 1024, True), (256, 1024, True)])
def test_persistent_matches_reference(D, S, causal, pingpong):
    """Config(PERSISTENT=True): one program per SM walks many tiles (B*H*S/128 of them), poisoned output."""
    B, H = 4, 16
    q, k, v = (torch.randn(B, H, S, D, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    cfg = attention.Config(BN=64 if D > 128 else 128, PINGPONG=pingpong, PERSISTENT=True)
    out = torch.full_like(q, float("nan"))
    _, lse = attention.attention(q, k, v, causal=causal, config=cfg, out=out, return_lse=True)
    torch.cuda.synchronize()
    ref = F.scaled_dot_product_attention(q.float(), k.float(), v.float(), is_causal=causal)
    assert not torch.isnan(out).any()
    assert rel_err(out, ref) <= 1e-2
    scores = (q.float() @ k.float().transpose(-1, -2)) / D ** 0.5
    if causal:
        scores = scores.masked_fill(torch.ones(S, S, device="cuda", dtype=torch.bool).triu(1), float("-inf"))
    assert rel_err(lse, torch.logsumexp(scores, -1)) <= 1e-3


@pytest.mark.parametrize("flags", ["", "pingpong", "pipeline,pingpong", "persistent,pipeline,pingpong"])
@pytest.mark.parametrize("S,causal,window,hkv", [(1024, False, None, 8), (1024, True, None, 2), (2048, True, None, 8),
                                                 (1152, False, (100, 30), 4)])
def test_three_consumers_gpu(S, causal, window, hkv, flags):
    """BM=192 (three consumer warp groups, D=64): S=1024 and 2048 leave the last tile's two or one
    consumers past the end (nothing stored); GQA and a window on the masked path; poisoned output
    and LSE against fp32."""
    B, H, D = 2, 8, 64
    q = torch.randn(B, H, S, D, device="cuda", dtype=torch.bfloat16)
    k, v = (torch.randn(B, hkv, S, D, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    on = set(flags.split(","))
    cfg = attention.Config(BM=192, PINGPONG="pingpong" in on, PIPELINE="pipeline" in on,
                           PERSISTENT="persistent" in on)
    out = torch.full_like(q, float("nan"))
    _, lse = attention.attention(q, k, v, causal=causal, window=window, config=cfg, out=out, return_lse=True)
    torch.cuda.synchronize()
    check_gpu(out, lse, *reference(q, k, v, causal=causal, window=window, dtype=torch.float32))


@pytest.mark.parametrize("D,S,causal,cfg", [
    (64, 1024, True, attention.Config(PERSISTENT=True, O_BUFFER=True)),
    (128, 2048, False, attention.Config(PERSISTENT=True, PINGPONG=True, O_BUFFER=True)),
    (128, 1024, True, attention.Config(STAGES=2, PIPELINE=True, O_BUFFER=True)),
    (64, 1152, False, attention.Config(BM=192, STAGES=3, PIPELINE=True, PINGPONG=True, O_BUFFER=True))],
    ids=["d64-persistent-causal", "d128-persistent-pingpong", "d128-pipeline-causal", "d64-b192"])
def test_own_output_buffer_gpu(D, S, causal, cfg):
    """O_BUFFER: output stores run in the background through their own shared buffer; poisoned output
    and LSE against fp32."""
    B, H = 4, 8
    q, k, v = (torch.randn(B, H, S, D, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    out = torch.full_like(q, float("nan"))
    _, lse = attention.attention(q, k, v, causal=causal, config=cfg, out=out, return_lse=True)
    torch.cuda.synchronize()
    check_gpu(out, lse, *reference(q, k, v, causal=causal, dtype=torch.float32))


@pytest.mark.parametrize("D,S,causal,cfg", [
    (128, 2048, False, attention.Config(STAGES=3, PIPELINE=True, PINGPONG=True, PIN_WAIT=True)),
    (128, 1024, True, attention.Config(STAGES=3, PIPELINE=True, PIN_WAIT=True)),
    (64, 1152, True, attention.Config(BM=192, STAGES=3, PIPELINE=True, PINGPONG=True, PIN_WAIT=True)),
    (128, 2048, False, attention.Config(STAGES=3, PIPELINE=True, PINGPONG=True, PIN_WAIT=True, P_EARLY=True)),
    (64, 2048, True, attention.Config(BN=256, PERSISTENT=True, P_EARLY=True)),
    (128, 1024, True, attention.Config(PERSISTENT=True, PINGPONG=True, P_EARLY=True))],
    ids=["d128", "d128-causal", "d64-b192-causal", "d128-early-p", "d64-persistent-causal-early-p",
         "d128-persistent-causal-early-p"])
def test_machine_code_order_options_gpu(D, S, causal, cfg):
    """PIN_WAIT (the P V wait kept after the softmax in the machine code) and P_EARLY (P converted
    before the V wait): poisoned output against fp32."""
    q, k, v = (torch.randn(4, 8, S, D, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    out = torch.full_like(q, float("nan"))
    attention.attention(q, k, v, causal=causal, config=cfg, out=out)
    torch.cuda.synchronize()
    ref = F.scaled_dot_product_attention(q.float(), k.float(), v.float(), is_causal=causal)
    assert not torch.isnan(out).any() and rel_err(out, ref) <= 1e-2


@pytest.mark.parametrize("ramp", [False, True], ids=["flat", "ramp"])
@pytest.mark.parametrize("D,S,causal,cfg,softcap", [
    (256, 2048, False, attention.Config(BN=64, LAZY_RESCALE=True), None),
    (256, 1024, True, attention.Config(BN=64, LAZY_RESCALE=True), None),
    (128, 4096, False, attention.Config(STAGES=3, PIPELINE=True, PINGPONG=True, LAZY_RESCALE=True), None),
    (128, 2048, True, attention.Config(STAGES=3, PIPELINE=True, LAZY_RESCALE=True), 30.0),
    (128, 1024, False, attention.Config(PERSISTENT=True, O_BUFFER=True, LAZY_RESCALE=True), None),
    (64, 2048, False, attention.Config(BN=256, PERSISTENT=True, O_BUFFER=True, LAZY_RESCALE=True), None),
    (64, 8192, True, attention.Config(BM=192, STAGES=3, PIPELINE=True, PINGPONG=True, LAZY_RESCALE=True), None)],
    ids=["d256", "d256-causal", "d128-pipeline-pingpong", "d128-pipeline-causal-softcap", "d128-persistent",
         "d64-persistent-bn256", "d64-b192-causal"])
def test_lazy_rescale_gpu(D, S, causal, cfg, softcap, ramp):
    """LAZY_RESCALE (the accumulator rescaled only when a row max ran 2^8 ahead): poisoned output and
    LSE against fp32. "ramp": key norms grow along the sequence and q is scaled up, so row maxima climb
    far past 2^128 (a kernel that skipped a needed rescale overflows)."""
    q, k, v = (torch.randn(2, 4, S, D, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    if ramp:
        q = q * 16
        k = k * torch.linspace(0.1, 6.0, S, device="cuda", dtype=torch.bfloat16)[:, None]
    out, lse = run_gpu(q, k, v, config=cfg, causal=causal, softcap=softcap)
    check_gpu(out, lse, *reference(q, k, v, causal=causal, softcap=softcap, dtype=torch.float32))


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=str)
@pytest.mark.parametrize("D,S,causal,cfg", [
    (64, 2048, False, attention.Config(BN=256, PERSISTENT=True, O_BUFFER=True, POLY_EXP2=True)),
    (64, 1024, True, attention.Config(PERSISTENT=True, P_EARLY=True, POLY_EXP2=True)),
    (64, 8192, True, attention.Config(BM=192, STAGES=3, PIPELINE=True, PINGPONG=True, POLY_EXP2=True)),
    (128, 4096, False, attention.Config(STAGES=3, PIPELINE=True, PINGPONG=True, POLY_EXP2=True)),
    (128, 1024, True, attention.Config(PERSISTENT=True, O_BUFFER=True, POLY_EXP2=True))],
    ids=["d64-persistent-bn256", "d64-persistent-causal", "d64-b192-causal", "d128-pipeline-pingpong",
         "d128-persistent-causal"])
def test_poly_exp2_gpu(D, S, causal, cfg, dtype):
    """POLY_EXP2 (a quarter of the exps by polynomial on the FMA pipes): poisoned output and LSE
    against fp32 in both input dtypes (fp16's P keeps 3 more bits than bf16's)."""
    q, k, v = (torch.randn(2, 4, S, D, device="cuda", dtype=dtype) for _ in range(3))
    out, lse = run_gpu(q, k, v, config=cfg, causal=causal)
    check_gpu(out, lse, *reference(q, k, v, causal=causal, dtype=torch.float32))


@pytest.mark.parametrize("D,S,causal,cfg,softcap", [
    (256, 2048, False, attention.Config(BN=64, PIPELINE=True, RELEASE_K_EARLY=True), None),
    (256, 1024, True, attention.Config(BN=64, PIPELINE=True, PINGPONG=True, RELEASE_K_EARLY=True), None),
    (256, 2048, True, attention.Config(BN=64, RELEASE_K_EARLY=True), 30.0),
    (128, 4096, False, attention.Config(STAGES=2, PIPELINE=True, PINGPONG=True, RELEASE_K_EARLY=True), None),
    (128, 1024, True, attention.Config(STAGES=2, PIPELINE=True, PINGPONG=True, PERSISTENT=True, O_BUFFER=True,
                                       RELEASE_K_EARLY=True), None),
    (64, 8192, True, attention.Config(BM=192, STAGES=2, PIPELINE=True, PINGPONG=True, RELEASE_K_EARLY=True), None)],
    ids=["d256-pipeline", "d256-pipeline-pingpong-causal", "d256-causal-softcap", "d128-s2-pipeline-pingpong",
         "d128-persistent-causal", "d64-b192-s2-causal"])
def test_release_k_early_gpu(D, S, causal, cfg, softcap):
    """RELEASE_K_EARLY (a K stage refilled once Q K^T has read it, V after P V): poisoned output and LSE
    against fp32."""
    q, k, v = (torch.randn(2, 4, S, D, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    out, lse = run_gpu(q, k, v, config=cfg, causal=causal, softcap=softcap)
    check_gpu(out, lse, *reference(q, k, v, causal=causal, softcap=softcap, dtype=torch.float32))


@pytest.mark.parametrize("D,S,causal,window,cfg", [
    (64, 1024, True, None, attention.Config(BN=64, STAGES=2, PIPELINE=True, PINGPONG=True, PERSISTENT=True,
                                            RELEASE_K_EARLY=True)),
    (64, 2048, True, None, attention.Config(BM=192, STAGES=2, PIPELINE=True, PINGPONG=True, PERSISTENT=True,
                                            RELEASE_K_EARLY=True)),
    (128, 2048, False, (300, 40), attention.Config(BN=64, PINGPONG=True)),
    (128, 1024, True, None, attention.Config(BN=64, STAGES=3, PIPELINE=True, PERSISTENT=True, O_BUFFER=True,
                                             RELEASE_K_EARLY=True))],
    ids=["d64-bn64-causal-persistent", "d64-b192-causal-persistent", "d128-bn64-window", "d128-bn64-causal-obuf"])
def test_skip_blocks_gpu(D, S, causal, window, cfg):
    """Consumers skipping the blocks their rows cannot attend (64-key causal diagonals, 192-row tiles,
    window edges): poisoned output and LSE against fp32."""
    q, k, v = (torch.randn(2, 4, S, D, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    out, lse = run_gpu(q, k, v, config=cfg, causal=causal, window=window)
    check_gpu(out, lse, *reference(q, k, v, causal=causal, window=window, dtype=torch.float32))


PERSISTENT_CASES = [  # (D, S, causal, a persistent config without a tile order)
    (64, 1024, True, attention.Config(PERSISTENT=True, P_EARLY=True)),
    (64, 2048, True, attention.Config(BM=192, STAGES=2, PIPELINE=True, PINGPONG=True, PERSISTENT=True,
                                      RELEASE_K_EARLY=True)),
    (128, 2048, True, attention.Config(STAGES=2, PIPELINE=True, PERSISTENT=True, O_BUFFER=True, RELEASE_K_EARLY=True)),
    (256, 1024, False, attention.Config(BN=64, PIPELINE=True, PINGPONG=True, PERSISTENT=True, RELEASE_K_EARLY=True)),
    (256, 1024, True, attention.Config(BN=64, PIPELINE=True, PERSISTENT=True, RELEASE_K_EARLY=True))]


@pytest.mark.parametrize("order", [dict(DYNAMIC=True), dict(BALANCED=True), dict(DYNAMIC=True, BALANCED=True, TAIL=0.3),
                                   dict(BALANCED=True, PREFETCH=True)],
                         ids=["dynamic", "balanced", "balanced-tail", "balanced-prefetch"])
@pytest.mark.parametrize("D,S,causal,cfg", PERSISTENT_CASES,
                         ids=["d64-causal", "d64-b192-causal", "d128-causal-obuf", "d256-pingpong", "d256-causal"])
def test_tile_orders_gpu(D, S, causal, cfg, order):
    """The persistent tile orders on 132 programs: DYNAMIC (tiles from a global counter, the programs racing
    for them), BALANCED (each program runs its row of the host's table), both (the table's tail from the
    counter). One prepared launch run three times into a re-poisoned output: each output right, and the
    launch's counter back at zero after each run (the next run starts from it)."""
    from dataclasses import replace
    cfg = replace(cfg, **order)
    q, k, v = (torch.randn(4, 6, S, D, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    ref = reference(q, k, v, causal=causal, dtype=torch.float32)
    out, lse = torch.empty_like(q), torch.empty(4, 6, S, device="cuda")
    args, grid, meta, _ = attention.launch_args(q, k, v, out, lse, D ** -0.5, "bhsd", cfg,
                                                attention.Features(causal=causal))
    launch = attention.attention_fwd_kernel.prepare(*args, grid=grid, num_warps=cfg.num_warps, **meta)
    counter = args[-3]
    for _ in range(3):
        out.fill_(float("nan"))
        lse.fill_(float("nan"))
        launch()
        torch.cuda.synchronize()
        check_gpu(out, lse, *ref)
        if cfg.DYNAMIC:
            assert counter.item() == 0


@pytest.mark.parametrize("S,cfg", [
    (4096, attention.Config(BN=192, STAGES=2, PIPELINE=True, RELEASE_K_EARLY=True)),
    (8192, attention.Config(BN=192, STAGES=2, PIPELINE=True, PINGPONG=True, RELEASE_K_EARLY=True)),
    (1024, attention.Config(BN=192, STAGES=2, PIPELINE=True, PINGPONG=True, P_EARLY=True, PIN_WAIT=True)),
    (1152, attention.Config(BN=192, STAGES=2, PIPELINE=True, PERSISTENT=True, RELEASE_K_EARLY=True))],
    ids=["4096-tail64", "8192-tail128-pingpong", "1024-tail64-early-pin", "1152-persistent"])
def test_wide_blocks_gpu(S, cfg):
    """BN=192: 128- and 64-key wgmma parts per block, the sequence's last 64 or 128 keys as a narrower
    block; poisoned output and LSE against fp32."""
    q, k, v = (torch.randn(2, 8, S, 128, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    out = torch.full_like(q, float("nan"))
    _, lse = attention.attention(q, k, v, config=cfg, out=out, return_lse=True)
    torch.cuda.synchronize()
    check_gpu(out, lse, *reference(q, k, v, dtype=torch.float32))


@pytest.mark.parametrize("D,S,causal,base", [
    (64, 2048, True, 4096), (64, 4096, True, 4096), (64, 4096, False, 4096), (64, 1024, False, 4096),
    (64, 1024, True, 4096), (64, 16384, True, 16384)],
    ids=["d64-2048-causal", "d64-4096-causal", "d64-4096", "d64-1024", "d64-1024-causal", "d64-16384-causal"])
def test_skip_dead_consumers_gpu(D, S, causal, base):
    """SKIP_DEAD on the three-consumer D=64 defaults (BALANCED causal, persistent non-causal): at S = 2^k
    the last tile of each head has one or two consumers past the end, which now compute nothing; three
    launches into a poisoned output and LSE against fp32."""
    cfg = replace(attention.default_config(D, base, causal), SKIP_DEAD=True)
    B, H = max(1, 16384 // S // 4), 4
    q, k, v = (torch.randn(B, H, S, D, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    ref = reference(q, k, v, causal=causal, dtype=torch.float32)
    out = torch.empty_like(q)
    for _ in range(3):
        out.fill_(float("nan"))
        _, lse = attention.attention(q, k, v, causal=causal, config=cfg, out=out, return_lse=True)
        torch.cuda.synchronize()
        check_gpu(out, lse, *ref)


@pytest.mark.parametrize("D,S,causal,layout,cfg", [
    (128, 2048, True, "bhsd", None),                   # the default: persistent, BALANCED, causal diagonals
    (128, 1024, False, "bshd", None),                  # the default through the [B, S, H, D] views
    (128, 1536, True, "bhsd", attention.Config(STAGES=3, PIPELINE=True, PINGPONG=True, Q_IN_REGS=True)),
    (64, 1024, True, "bhsd", attention.Config(PERSISTENT=True, BALANCED=True, DYNAMIC=True, HALF_DIAGONAL=True,
                                              O_BUFFER=True, P_EARLY=True, Q_IN_REGS=True)),
    (64, 1024, False, "bhsd", attention.Config(BN=256, PERSISTENT=True, O_BUFFER=True, Q_IN_REGS=True))],
    ids=["d128-default-causal", "d128-default-bshd", "d128-grid-pingpong-causal", "d64-causal-half", "d64-bn256"])
def test_q_in_registers_gpu(D, S, causal, layout, cfg):
    """Q_IN_REGS (Q K^T's Q from registers, the plain D=128 default): masked diagonal and edge loops, the
    bshd views, the grid kernel, and D=64's two-consumer tiles: poisoned output and LSE against fp32."""
    assert cfg is not None or attention.default_config(D, S, causal).Q_IN_REGS
    q, k, v = (torch.randn(2, 4, S, D, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    ref = reference(q, k, v, causal=causal, dtype=torch.float32)
    if layout == "bshd":
        q, k, v = (t.transpose(1, 2).contiguous() for t in (q, k, v))
    out, lse = run_gpu(q, k, v, config=cfg, causal=causal, layout=layout)
    if layout == "bshd":
        out = out.transpose(1, 2)
    check_gpu(out, lse, *ref)


@pytest.mark.parametrize("D,S,layout,cfg", [
    (128, 4096, "bhsd", None), (128, 1024, "bshd", None),
    (128, 1024, "bhsd", attention.Config(STAGES=2, PIPELINE=True, PERSISTENT=True, O_BUFFER=True,
                                         RELEASE_K_EARLY=True, Q_IN_REGS=True, PROGRAMS=6, CLUSTER=2)),
    (64, 2048, "bhsd", attention.Config(PIPELINE=True, PERSISTENT=True, PINGPONG=True, CLUSTER=2)),
    (256, 2048, "bhsd", None), (64, 4096, "bhsd", None)],
    ids=["d128-default-4096", "d128-default-bshd", "d128-partial-round", "d64-pingpong", "d256-default",
         "d64-default-192-rows"])
def test_cluster_multicast_gpu(D, S, layout, cfg):
    """CLUSTER=2 (two-CTA clusters sharing every K/V block by TMA multicast) on the GPU: the plain D=128
    default with CLUSTER=2 (co-resident cluster count from the driver), a bshd view, six programs with a
    partial last round, D=64 with ping-pong turns, and the D=256 (64-key blocks) and D=64 (three consumers)
    non-causal defaults with CLUSTER=2: poisoned output and LSE against fp32."""
    cfg = cfg or replace(attention.default_config(D, S, False), CLUSTER=2)
    q, k, v = (torch.randn(2, 4, S, D, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    ref = reference(q, k, v, dtype=torch.float32)
    if layout == "bshd":
        q, k, v = (t.transpose(1, 2).contiguous() for t in (q, k, v))
    out, lse = run_gpu(q, k, v, config=cfg, layout=layout)
    if layout == "bshd":
        out = out.transpose(1, 2)
    check_gpu(out, lse, *ref)
