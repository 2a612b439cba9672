"""Every library kernel on the CPU simulator at small shapes against a float64 torch reference."""
from dataclasses import replace
from types import SimpleNamespace

import pytest
import torch
import torch.nn.functional as F

import triton
import triton.language as tl

import tlx
from tests.test_attention_features import reference
from tlx.errors import ConfigRejected
from tlx.kernels import attention, gemm
from tlx.kernels.attention import exp2_poly
from tlx.kernels.vector_add import two_task_add


def rel_err(out, ref):
    return ((out.double() - ref).norm() / ref.norm()).item()


def test_readme_two_task_add():
    x, y = torch.randn(5000), torch.randn(5000)
    out = torch.full((5000,), float("nan"))
    two_task_add[(5,)](x, y, out, 5000, BLOCK=1024, backend="sim")
    assert torch.equal(out, x + y)


@pytest.mark.parametrize("cfg", [gemm.Config("persistent", 128, 128, 64, 2), gemm.Config("ws", 128, 128, 64, 2),
                                 gemm.Config("pingpong", 128, 128, 64, 3),
                                 gemm.Config("pipelined", 128, 128, 64, 3, 8, 4),
                                 gemm.Config("pipelined", 64, 128, 64, 3, 8, 4),
                                 gemm.Config("pipelined", 128, 256, 64, 3, 8, 8, LEAN_SYNC=True)],
                         ids=lambda c: c.name())
def test_gemm_kernels(cfg):
    a = torch.randn(200, 136, dtype=torch.float16)     # partial tiles in M, N and K
    b = torch.randn(136, 264, dtype=torch.float16)
    c = torch.full((200, 264), float("nan"), dtype=torch.float16)
    gemm.matmul(a, b, cfg, out=c, backend="sim")
    assert rel_err(c, a.double() @ b.double()) <= 1e-2


@pytest.mark.parametrize("M,N,K,splits,act,out_dtype", [(128, 256, 1024, 0, None, None), (100, 200, 704, 3, "gelu", None),
                                                   (136, 128, 512, 2, "relu", torch.float32)])
def test_splitk_gemm(M, N, K, splits, act, out_dtype):
    """Split-K: fp32 partials of K slices (the last one shorter), summed with bias and activation."""
    a, b = torch.randn(M, K, dtype=torch.float16), torch.randn(K, N, dtype=torch.float16)
    bias = torch.randn(N, dtype=torch.float16) if act else None
    c = torch.full((M, N), float("nan"), dtype=out_dtype or torch.float16)
    cfg = gemm.Config("pipelined", 128, 128, 64, 3, 8, 4, SPLIT_K=splits)
    gemm.matmul(a, b, cfg, out=c, bias=bias, activation=act, out_dtype=out_dtype, backend="sim", programs=8)
    ref = a.double() @ b.double() + (0 if bias is None else bias.double())
    ref = {None: lambda x: x, "relu": torch.relu, "gelu": F.gelu}[act](ref)
    assert cfg.splits(M, N, K, 8) > 1
    assert rel_err(c, ref) <= 1e-2


@pytest.mark.parametrize("at,bt,act,out_dtype", [(True, False, "relu", None), (False, True, "silu", torch.float32),
                                                 (True, True, "gelu", None)])
def test_persistent_gemm_transposes_and_epilogues(at, bt, act, out_dtype):
    M, N, K = 256, 192, 128
    a = torch.randn(K, M, dtype=torch.bfloat16).T if at else torch.randn(M, K, dtype=torch.bfloat16)
    b = torch.randn(N, K, dtype=torch.bfloat16).T if bt else torch.randn(K, N, dtype=torch.bfloat16)
    bias = torch.randn(N, dtype=torch.bfloat16)
    c = gemm.matmul(a, b, gemm.Config("persistent", 128, 128, 64, 2), bias=bias, activation=act,
                    out_dtype=out_dtype, backend="sim")
    ref = a.double() @ b.double() + bias.double()
    ref = {"relu": torch.relu, "silu": F.silu, "gelu": F.gelu}[act](ref)
    assert c.dtype == (out_dtype or torch.bfloat16)
    assert rel_err(c, ref) <= 1e-2


@pytest.mark.parametrize("D,causal,layout,hkv,pingpong", [(64, False, "bhsd", 2, False), (64, True, "bhsd", 1, True),
                                                          (128, True, "bshd", 2, False), (128, False, "bhsd", 2, True),
                                                          (256, False, "bhsd", 2, False)])
def test_attention(D, causal, layout, hkv, pingpong):
    B, H, S = 1, 2, 256
    q = torch.randn(B, H, S, D, dtype=torch.float16)
    k = torch.randn(B, hkv, S, D, dtype=torch.float16)
    v = torch.randn(B, hkv, S, D, dtype=torch.float16)
    to_layout = (lambda t: t.transpose(1, 2).contiguous()) if layout == "bshd" else (lambda t: t)
    cfg = attention.Config(BN=64 if D > 128 else 128, PINGPONG=pingpong)
    o, lse = attention.attention(to_layout(q), to_layout(k), to_layout(v), causal=causal, layout=layout,
                                 backend="sim", return_lse=True, config=cfg)
    kr, vr = k.repeat_interleave(H // hkv, 1), v.repeat_interleave(H // hkv, 1)
    ref = F.scaled_dot_product_attention(q.double(), kr.double(), vr.double(), is_causal=causal)
    assert rel_err(to_layout(o) if layout == "bhsd" else o.transpose(1, 2), ref) <= 1e-2
    scores = (q.double() @ kr.double().transpose(-1, -2)) / D ** 0.5
    if causal:
        scores = scores.masked_fill(torch.ones(S, S, dtype=torch.bool).triu(1), float("-inf"))
    assert rel_err(lse, torch.logsumexp(scores, -1)) <= 1e-4


@pytest.mark.parametrize("lean", [False, True], ids=["", "lean"])
@pytest.mark.parametrize("kernel", ["persistent", "pingpong"])
def test_persistent_gemms_walk_several_tiles_per_program(kernel, lean):
    """Few programs, so each walks several tiles: the ring's phases wrap and (ping-pong) the consumers
    alternate. An earlier ping-pong without main-loop ordering failed here (a consumer's wait passed on
    the other consumer's older phase) and crashed on the GPU."""
    from tlx.sim import SimOptions
    a = torch.randn(384, 128, dtype=torch.float16)
    b = torch.randn(128, 640, dtype=torch.float16)
    c = torch.full((384, 640), float("nan"), dtype=torch.float16)
    cfg = gemm.Config(kernel, 128, 128, 64, 2, LEAN_SYNC=lean)   # lean: the warpgroup_sync marks hold (rule 8)
    args, grid, meta = gemm.launch_args(a, b, c, cfg, programs=2)
    gemm.KERNELS[kernel][grid](*args, backend="sim", sim_options=SimOptions(schedules=4), **meta)
    assert rel_err(c, a.double() @ b.double()) <= 1e-2


@pytest.mark.parametrize("cfg", [gemm.Config("persistent", 128, 256, 64, 4, NO_ZERO_FILL=True, EPI_SPLIT=2),
                                 gemm.Config("persistent", 128, 128, 64, 2, LEAN_SYNC=True, EPI_SPLIT=4),
                                 gemm.Config("pipelined", 128, 256, 64, 4, 8, 8, EPI_SPLIT=4),
                                 gemm.Config("pipelined", 64, 128, 64, 3, 8, 4, EPI_SPLIT=2)], ids=lambda c: c.name())
def test_gemm_epilogue_in_column_chunks(cfg):
    """EPI_SPLIT: each tile leaves in column chunks through one staging buffer per consumer. Two programs
    walk several tiles, so a chunk's write must wait for the previous chunk's (and tile's) store; partial
    tiles in M, N and K, and a bias and activation where the kernel takes them."""
    from tlx.sim import SimOptions
    a = torch.randn(300, 200, dtype=torch.float16)
    b = torch.randn(200, 600, dtype=torch.float16)
    c = torch.full((300, 600), float("nan"), dtype=torch.float16)
    bias, act = (torch.randn(600, dtype=torch.float16), "gelu") if cfg.kernel == "persistent" else (None, None)
    args, grid, meta = gemm.launch_args(a, b, c, cfg, bias, act, programs=2)
    gemm.KERNELS[cfg.kernel][grid](*args, backend="sim", sim_options=SimOptions(schedules=2), **meta)
    ref = a.double() @ b.double()
    if bias is not None:
        ref = F.gelu(ref + bias.double())
    assert rel_err(c, ref) <= 1e-2


def test_epilogue_split_frees_a_ring_stage():
    """The point of EPI_SPLIT: a 128 x 256 persistent tile with four stages fits shared memory only when
    its C staging is split, and the split is refused where it has no meaning."""
    four = gemm.Config("persistent", 128, 256, 64, 4)
    assert four.shared_bytes(2, 2) > gemm.SHARED_LIMIT >= replace(four, EPI_SPLIT=2).shared_bytes(2, 2)
    with pytest.raises(tlx.ConfigRejected, match="'EPI_SPLIT' must be 1, 2 or 4"):
        gemm.Config("pingpong", 128, 128, 64, 4, EPI_SPLIT=2)
    with pytest.raises(tlx.ConfigRejected, match="'EPI_SPLIT' must be 1, 2 or 4"):
        gemm.Config("persistent", EPI_SPLIT=3)
    with pytest.raises(tlx.ConfigRejected, match="does not combine with SPLIT_K"):
        gemm.Config("pipelined", 128, 128, 64, 3, SPLIT_K=2, EPI_SPLIT=2)


@pytest.mark.parametrize("bt,lean,act", [(False, False, None), (True, True, None), (False, False, "gelu")],
                         ids=["plain", "b-transposed-lean", "bias-gelu"])
def test_cluster_gemm_shares_b_by_multicast(bt, lean, act):
    """CLUSTER=2 on the simulator: two clusters of two CTAs, each CTA loading half of B into both CTAs'
    stage; 384 rows are three row tiles, so the second pair's rank-1 tile lies wholly past M (zero-filled
    loads, a clipped store) and its CTA still walks the shared K loop. Several tiles per program."""
    from tlx.sim import SimOptions
    a = torch.randn(384, 192, dtype=torch.float16)
    b = torch.randn(384, 192, dtype=torch.float16).T if bt else torch.randn(192, 384, dtype=torch.float16)
    bias = torch.randn(384, dtype=torch.float16) if act else None
    c = torch.full((384, 384), float("nan"), dtype=torch.float16)
    cfg = gemm.Config("persistent", 128, 128, 64, 2, CLUSTER=2, LEAN_SYNC=lean)
    args, grid, meta = gemm.launch_args(a, b, c, cfg, bias, act, programs=4)
    assert grid == (4,) and meta["ctas_per_cga"] == (2, 1, 1)
    report = gemm.KERNELS["persistent"][grid](*args, backend="sim", sim_options=SimOptions(schedules=3), **meta)
    assert report.ok
    ref = a.double() @ b.double()
    if act:
        ref = F.gelu(ref + bias.double())
    assert rel_err(c, ref) <= 1e-2


def test_cluster_gemm_runs_through_the_op_and_refuses_bad_configs():
    a = torch.randn(256, 128, dtype=torch.float16)
    b = torch.randn(128, 256, dtype=torch.float16)
    cfg = gemm.Config("persistent", 128, 128, 64, 2, CLUSTER=2)
    c = gemm.matmul(a, b, cfg, backend="sim", programs=2)
    assert rel_err(c, a.double() @ b.double()) <= 1e-2
    for bad, msg in [(dict(kernel="pingpong", BN=128), "'CLUSTER' must be 1 or 2, and 2 only for the persistent"),
                     (dict(STREAM_K=True, NO_ZERO_FILL=True), "without STREAM_K"), (dict(CLUSTER=4), "got 4")]:
        with pytest.raises(tlx.ConfigRejected, match=msg):
            gemm.Config(**{"CLUSTER": 2, **bad})


def test_cluster_gemm_grid_fits_the_co_resident_clusters(monkeypatch):
    """A persistent cluster grid larger than the clusters the GPU runs at once (the driver's count, on
    the prepared launch) is rebuilt with that many clusters: the stride NUM_SMS and the grid shrink."""
    launches = []

    class StandIn:
        def prepare(self, *args, grid, num_warps, backend, **meta):
            launches.append((grid, meta["NUM_SMS"]))
            return SimpleNamespace(max_active_clusters=60)

    monkeypatch.setattr(gemm, "KERNELS", {**gemm.KERNELS, "persistent": StandIn()})
    monkeypatch.setattr(gemm, "_LAST_LAUNCH", gemm.LaunchCache())
    a, b = torch.randn(4096, 256, dtype=torch.float16), torch.randn(256, 4096, dtype=torch.float16)
    cfg = gemm.Config("persistent", 128, 256, 64, 3, 16, NO_ZERO_FILL=True, CLUSTER=2)
    with pytest.raises(TypeError):        # the stand-in launch is not callable: only its preparation is checked
        gemm.matmul(a, b, cfg)
    assert launches == [((132,), 132), ((120,), 120)]


@pytest.mark.parametrize("causal,window,cfg", [
    (False, None, attention.Config(BM=192, PINGPONG=True)),
    (True, None, attention.Config(BM=192, PIPELINE=True, PINGPONG=True, PERSISTENT=True, PROGRAMS=2)),
    (False, (40, 10), attention.Config(BM=192, PIPELINE=True))], ids=["pingpong", "causal-persistent", "window"])
@pytest.mark.parametrize("layout", ["bhsd", "bshd"])
def test_attention_three_consumers(causal, window, cfg, layout):
    """BM=192: three consumer warp groups (round-robin turns with PINGPONG); S=256 leaves two of the
    second tile's consumers past the end, which must store nothing (the output is poisoned)."""
    B, H, Hk, S, D = 2, 2, 1, 256, 64
    q = torch.randn(B, H, S, D, dtype=torch.float16)
    k, v = (torch.randn(B, Hk, S, D, dtype=torch.float16) for _ in range(2))
    to_layout = (lambda t: t.transpose(1, 2).contiguous()) if layout == "bshd" else (lambda t: t)
    out = torch.full_like(to_layout(q), float("nan"))            # bshd: the last tile reads the next batch's rows
    _, lse = attention.attention(to_layout(q), to_layout(k), to_layout(v), causal=causal, window=window, config=cfg,
                                 out=out, backend="sim", return_lse=True, layout=layout)
    out = out.transpose(1, 2) if layout == "bshd" else out
    ref, ref_lse = reference(q, k, v, causal=causal, window=window)
    assert rel_err(out, ref) <= 1e-2
    assert rel_err(lse, ref_lse) <= 1e-4


@pytest.mark.parametrize("D,causal,cfg", [
    (64, True, attention.Config(PERSISTENT=True, PROGRAMS=2, O_BUFFER=True)),
    (128, False, attention.Config(PINGPONG=True, O_BUFFER=True)),
    (64, True, attention.Config(BM=192, STAGES=3, PIPELINE=True, PINGPONG=True, PERSISTENT=True, PROGRAMS=2,
                                O_BUFFER=True))], ids=["persistent-causal", "grid", "b192-persistent"])
def test_attention_own_output_buffer(D, causal, cfg):
    """O_BUFFER: the output goes through its own shared buffer and the store is waited for only before
    the next tile writes it (the simulator reports a buffer rewritten while its TMA store reads it);
    persistent programs release Q's buffer as soon as its last wgmma retires."""
    from tlx.sim import SimOptions
    q, k, v = (torch.randn(2, 2, 256, D, dtype=torch.float16) for _ in range(3))
    out = torch.full_like(q, float("nan"))
    attention.attention(q, k, v, causal=causal, config=cfg, out=out, backend="sim", sim_options=SimOptions(schedules=3))
    ref = F.scaled_dot_product_attention(q.double(), k.double(), v.double(), is_causal=causal)
    assert rel_err(out, ref) <= 1e-2


@pytest.mark.parametrize("D,causal,cfg", [
    (128, True, attention.Config(STAGES=3, PIPELINE=True, PINGPONG=True, PIN_WAIT=True)),
    (64, False, attention.Config(BM=192, STAGES=3, PIPELINE=True, PINGPONG=True, PIN_WAIT=True, P_EARLY=True)),
    (128, True, attention.Config(PINGPONG=True, P_EARLY=True))],
    ids=["d128-causal", "d64-b192-early-p", "d128-causal-early-p"])
def test_attention_machine_code_order_options(D, causal, cfg):
    """PIN_WAIT (the pipelined loop stores its row sums to a scratch buffer before the P V wait) and
    P_EARLY (P converted before the V wait) change machine code order only; the results are the
    plain kernel's."""
    q, k, v = (torch.randn(1, 2, 512, D, dtype=torch.float16) for _ in range(3))
    out = torch.full_like(q, float("nan"))
    attention.attention(q, k, v, causal=causal, config=cfg, out=out, backend="sim")
    ref = F.scaled_dot_product_attention(q.double(), k.double(), v.double(), is_causal=causal)
    assert rel_err(out, ref) <= 1e-2


def check_attention_sim(q, k, v, cfg, causal=False, window=None, schedules=None):
    """attention() on the simulator into a poisoned output (`schedules` interleavings of the tasks);
    output and LSE against the float64 reference."""
    from tlx.sim import SimOptions
    out = torch.full_like(q, float("nan"))
    out, lse = attention.attention(q, k, v, causal=causal, window=window, config=cfg, out=out, backend="sim",
                                   return_lse=True, sim_options=SimOptions(schedules=schedules) if schedules else None)
    ref, ref_lse = reference(q, k, v, causal=causal, window=window)
    assert rel_err(out, ref) <= 1e-2
    assert rel_err(lse, ref_lse) <= 1e-4


@pytest.mark.parametrize("D,causal,cfg", [
    (256, False, attention.Config(BN=64, LAZY_RESCALE=True)),
    (128, True, attention.Config(STAGES=3, PIPELINE=True, PINGPONG=True, LAZY_RESCALE=True)),
    (64, False, attention.Config(BN=256, PERSISTENT=True, PROGRAMS=2, LAZY_RESCALE=True))],
    ids=["d256", "d128-pipelined-causal", "d64-persistent"])
@pytest.mark.parametrize("ramp", [False, True], ids=["flat", "ramp"])
def test_attention_lazy_rescale(D, causal, cfg, ramp):
    """LAZY_RESCALE keeps a stale row max until some row runs 2^8 ahead of it. "ramp": key norms grow
    along the sequence so the row max climbs by far more than 2^128 overall (a kernel that never
    rescaled would overflow to inf), most blocks rescale; "flat": plain normal data, the first block
    rescales and later ones rarely. Output and LSE must match the exact softmax either way."""
    S = 512
    q, k, v = (torch.randn(1, 2, S, D, dtype=torch.float16) for _ in range(3))
    if ramp:
        q = q * 16
        k = k * torch.linspace(0.1, 6.0, S, dtype=torch.float16)[:, None]
    check_attention_sim(q, k, v, cfg, causal=causal)


@pytest.mark.parametrize("D,causal,cfg", [
    (256, False, attention.Config(BN=64, PIPELINE=True, RELEASE_K_EARLY=True)),
    (128, True, attention.Config(PIPELINE=True, PINGPONG=True, PERSISTENT=True, PROGRAMS=2, RELEASE_K_EARLY=True)),
    (64, True, attention.Config(BN=64, STAGES=1, PINGPONG=True, RELEASE_K_EARLY=True))],
    ids=["d256-pipelined", "d128-pipelined-persistent-causal", "d64-one-stage-causal"])
def test_attention_release_k_early(D, causal, cfg):
    """RELEASE_K_EARLY: a K stage goes back to the producer once Q K^T has read it, while P V may
    still read the V stage beside it. The simulator's schedules interleave the producer's refill with
    the consumers; it reports a K or V buffer overwritten while a wgmma reads it."""
    q, k, v = (torch.randn(1, 2, 512, D, dtype=torch.float16) for _ in range(3))
    check_attention_sim(q, k, v, cfg, causal=causal, schedules=3)


@pytest.mark.parametrize("D,S,cfg", [
    (128, 384, attention.Config(BN=192, PIPELINE=True)),
    (128, 640, attention.Config(BN=192, PIPELINE=True, PINGPONG=True, RELEASE_K_EARLY=True)),
    (128, 512, attention.Config(BN=192, PIPELINE=True, P_EARLY=True, PIN_WAIT=True)),
    (64, 128, attention.Config(BN=192, PIPELINE=True, RELEASE_K_EARLY=True)),
    (128, 1024, attention.Config(BN=192, PIPELINE=True, PERSISTENT=True, PROGRAMS=3, RELEASE_K_EARLY=True))],
    ids=["d128-two-blocks", "d128-tail64-pingpong", "d128-tail128-early", "d64-tail-only", "d128-persistent"])
def test_attention_wide_blocks(D, S, cfg):
    """BN=192 (pipelined_wide_blocks): each block's Q K^T and P V as a 128-key and a 64-key wgmma, the
    last block's 64 or 128 keys as a narrower block (S % 192); three rotated schedules each."""
    q, k, v = (torch.randn(1, 2, S, D, dtype=torch.float16) for _ in range(3))
    check_attention_sim(q, k, v, cfg, schedules=3)


def test_attention_wide_blocks_gqa_persistent():
    """BN=192 with two query heads per K/V head, persistent ping-pong over three programs (each program's
    tiles cross heads and batches): every 64-row TMA box of a stage reads the group's K/V head."""
    q = torch.randn(2, 4, 512, 128, dtype=torch.float16)
    k, v = (torch.randn(2, 2, 512, 128, dtype=torch.float16) for _ in range(2))
    cfg = attention.Config(BN=192, PIPELINE=True, PINGPONG=True, RELEASE_K_EARLY=True, PERSISTENT=True, PROGRAMS=3)
    check_attention_sim(q, k, v, cfg, schedules=2)


@pytest.mark.parametrize("layout", ["bhsd", "bshd"])
def test_attention_wide_blocks_take_lengths_the_default_refuses(layout):
    """576 keys (three 192-key blocks) is no multiple of the D=128 default's 128-key block: with the default
    config "bhsd" refuses it by name; with an explicit BN=192 config both layouts run it as fixed lengths."""
    from tlx.sim import SimOptions
    q, k, v = (torch.randn(1, 2, 576, 128, dtype=torch.float16) for _ in range(3))
    if layout == "bshd":
        q, k, v = (t.transpose(1, 2).contiguous() for t in (q, k, v))
    wide = attention.Config(BN=192, PIPELINE=True, RELEASE_K_EARLY=True)
    args, grid, meta, _ = attention.launch_args(q, k, v, q, None, 1.0, layout, wide)
    assert meta["BN"] == 192 and not meta["VARLEN"]           # fixed lengths, not the packed fallback
    out = torch.full_like(q, float("nan"))
    out, lse = attention.attention(q, k, v, layout=layout, config=wide, out=out, backend="sim", return_lse=True,
                                   sim_options=SimOptions(schedules=2))
    as_bhsd = (lambda t: t.transpose(1, 2)) if layout == "bshd" else (lambda t: t)
    ref, ref_lse = reference(*(as_bhsd(t) for t in (q, k, v)))
    assert rel_err(as_bhsd(out), ref) <= 1e-2
    assert rel_err(lse, ref_lse) <= 1e-4
    if layout == "bhsd":
        with pytest.raises(ValueError, match="sequence length must be a multiple of 128, got 576"):
            attention.attention(q, k, v, backend="sim")


@pytest.mark.parametrize("skip_dead", [False, True], ids=["dead-rows-computed", "dead-rows-skipped"])
def test_attention_skip_dead_consumers(monkeypatch, skip_dead):
    """SKIP_DEAD: at 256 keys a 192-row tile's second tile has one live consumer (rows 192-255) and two
    whose rows lie past the end. Those two issue no wgmma (they only pass each block on) and the output
    still matches; without the option they run both blocks like the live one."""
    from tlx.sim import warpgroup_sync
    issued = {}
    dot_issued = warpgroup_sync.dot_issued

    def count(ctx, record):
        key = (ctx.task.index, ctx.task.replica)
        issued[key] = issued.get(key, 0) + 1
        return dot_issued(ctx, record)
    monkeypatch.setattr(warpgroup_sync, "dot_issued", count)
    cfg = attention.Config(BM=192, STAGES=2, PIPELINE=True, PINGPONG=True, RELEASE_K_EARLY=True, SKIP_DEAD=skip_dead)
    q, k, v = (torch.randn(1, 1, 256, 64, dtype=torch.float16) for _ in range(3))
    check_attention_sim(q, k, v, cfg, schedules=2)
    per_replica = sorted(issued.values())
    # two schedules x (tile 0: 2 blocks x 2 wgmmas per consumer; tile 1: the same, or nothing when dead)
    assert per_replica == ([8, 8, 16] if skip_dead else [16, 16, 16])


@pytest.mark.parametrize("D,S,causal,cfg", [
    (64, 512, True, replace(attention.default_config(64, 4096, True), SKIP_DEAD=True, PROGRAMS=3)),
    (64, 256, False, replace(attention.default_config(64, 4096, False), SKIP_DEAD=True, PROGRAMS=2)),
    (64, 320, True, attention.Config(BN=64, PERSISTENT=True, PROGRAMS=2, O_BUFFER=True, P_EARLY=True, BALANCED=True,
                                     DYNAMIC=True, SKIP_DEAD=True)),
    (128, 320, False, attention.Config(BN=192, PIPELINE=True, PINGPONG=True, RELEASE_K_EARLY=True, SKIP_DEAD=True))],
    ids=["d64-b192-causal-balanced", "d64-b192-persistent", "d64-dynamic-causal", "d128-wide"])
def test_attention_skip_dead_consumers_across_builds(D, S, causal, cfg):
    """SKIP_DEAD in the builds whose last tile reaches past the end: the three-consumer defaults (one or two
    dead consumers), a DYNAMIC causal 128-row tile over 64-key blocks, and 192-key blocks with a 128-key tail."""
    q, k, v = (torch.randn(1, 2, S, D, dtype=torch.float16) for _ in range(3))
    check_attention_sim(q, k, v, cfg, causal=causal, schedules=2)


def test_attention_wide_blocks_refuse_what_they_do_not_run():
    """BN=192 runs plain non-causal softmax at fixed lengths, with PIPELINE: anything else is refused by name."""
    q = torch.randn(1, 2, 384, 128, dtype=torch.float16)
    wide = attention.Config(BN=192, PIPELINE=True)
    for kw, words in [(dict(causal=True), "non-causal"), (dict(softcap=5.0), "non-causal"),
                      (dict(activation="gelu"), "non-causal")]:
        with pytest.raises(ConfigRejected, match=words):
            attention.attention(q, q, q, config=wide, backend="sim", **kw)
    with pytest.raises(ConfigRejected, match="head dim 64 or 128"):
        attention.attention(*(torch.randn(1, 2, 384, 256, dtype=torch.float16),) * 3, config=wide, backend="sim")
    with pytest.raises(ConfigRejected, match="needs PIPELINE=True"):
        attention.Config(BN=192)
    with pytest.raises(ConfigRejected, match="BN must be 64, 128, 192 or 256"):
        attention.Config(BN=96)
    with pytest.raises(ConfigRejected, match="shared memory"):
        attention.attention(q, q, q, config=attention.Config(BN=192, PIPELINE=True, STAGES=3), backend="sim")


@pytest.mark.parametrize("D,causal,cfg", [
    (64, True, attention.Config(PERSISTENT=True, PROGRAMS=3, P_EARLY=True, DYNAMIC=True)),
    (64, True, attention.Config(BM=192, STAGES=2, PIPELINE=True, PINGPONG=True, PERSISTENT=True, PROGRAMS=2,
                                RELEASE_K_EARLY=True, DYNAMIC=True)),
    (128, False, attention.Config(STAGES=2, PIPELINE=True, PERSISTENT=True, PROGRAMS=2, O_BUFFER=True,
                                  RELEASE_K_EARLY=True, DYNAMIC=True)),
    (64, True, attention.Config(PERSISTENT=True, PROGRAMS=3, P_EARLY=True, DYNAMIC=True, BALANCED=True, TAIL=0.3)),
    (128, True, attention.Config(STAGES=2, PIPELINE=True, PERSISTENT=True, PROGRAMS=2, O_BUFFER=True,
                                 RELEASE_K_EARLY=True, DYNAMIC=True, BALANCED=True, TAIL=0.5))],
    ids=["d64-causal", "d64-b192-causal", "d128-obuf", "d64-causal-balanced-tail", "d128-causal-balanced-tail"])
def test_attention_dynamic_tiles(D, causal, cfg, monkeypatch):
    """DYNAMIC: programs take tiles from a global counter; the producer sends each tile's number with its Q
    and a last row of -1 (with BALANCED, first the tiles the host's table dealt the program, then the
    table's undealt tail from the counter). Six heads in groups of four (a partial last group), two
    schedules: every tile computed once (poisoned output); and the launch's last fetch leaves the counter at
    zero."""
    monkeypatch.setattr(attention, "L2_SHARE", 4 * 2 * 384 * D * 2)     # head_group = 4 of the 6 heads
    q, k, v = (torch.randn(2, 3, 384, D, dtype=torch.float16) for _ in range(3))
    check_attention_sim(q, k, v, cfg, causal=causal, schedules=2)
    o, lse = torch.empty_like(q), torch.empty(2, 3, 384)
    args, grid, meta, _ = attention.launch_args(q, k, v, o, lse, D ** -0.5, "bhsd", cfg,
                                                attention.Features(causal=causal))
    counter, head_group = args[-3], args[-2]
    assert head_group == 4 and counter.item() == 0
    attention.attention_fwd_kernel[grid](*args, num_warps=cfg.num_warps, backend="sim", **meta)
    assert counter.item() == 0


@pytest.mark.parametrize("D,causal,window,cfg", [
    (64, True, None, attention.Config(PERSISTENT=True, PROGRAMS=3, P_EARLY=True, BALANCED=True)),
    (64, True, None, attention.Config(BM=192, STAGES=2, PIPELINE=True, PINGPONG=True, PERSISTENT=True, PROGRAMS=2,
                                      RELEASE_K_EARLY=True, BALANCED=True)),
    (128, False, (100, 30), attention.Config(STAGES=2, PIPELINE=True, PERSISTENT=True, PROGRAMS=2, O_BUFFER=True,
                                             RELEASE_K_EARLY=True, BALANCED=True))],
    ids=["d64-causal", "d64-b192-causal", "d128-window-obuf"])
@pytest.mark.parametrize("prefetch", [False, True], ids=["", "prefetch"])
def test_attention_balanced_tiles(D, causal, window, cfg, prefetch, monkeypatch):
    """BALANCED: each program runs the tiles of its row of the host's table (the producer and its consumers
    read the same row; PREFETCH: each number a tile ahead). Six heads in groups of four (a partial last
    group), two schedules, into a poisoned output: every tile computed once."""
    cfg = replace(cfg, PREFETCH=prefetch)
    monkeypatch.setattr(attention, "L2_SHARE", 4 * 2 * 384 * D * 2)     # head_group = 4 of the 6 heads
    q, k, v = (torch.randn(2, 3, 384, D, dtype=torch.float16) for _ in range(3))
    check_attention_sim(q, k, v, cfg, causal=causal, window=window, schedules=2)


@pytest.mark.parametrize("costs,heads,programs,group", [([5.2, 9.2, 13.2, 17.2, 21.2, 25.2, 29.2, 33.2], 128, 132, 16),
                                                        ([2.2, 3.2, 4.2, 5.2], 6, 4, 4), ([3.0], 5, 5, 2),
                                                        ([1.0, 7.0, 3.0], 40, 7, 40)])
def test_balanced_tiles_deal_every_tile_once(costs, heads, programs, group):
    """The table of balanced_tiles: every tile exactly once, each program's tiles group by group, inside a
    group longest and shortest in turn, and no program's total more than the longest tile above the mean."""
    table = attention.balanced_tiles(costs, heads, programs, group)
    offsets, tiles = table[:programs + 1], table[programs + 1:]
    assert offsets[0] == 0 and offsets[-1] == len(tiles) and sorted(tiles) == list(range(heads * len(costs)))
    num_m = len(costs)
    totals = []
    for p in range(programs):
        mine = tiles[offsets[p]:offsets[p + 1]]
        groups = [(t // num_m) // group for t in mine]
        assert groups == sorted(groups) and mine
        for g in set(groups):
            run = [costs[t % num_m] for t in mine if (t // num_m) // group == g]
            longest_first = sorted(run, reverse=True)
            assert run == [longest_first[i // 2] if i % 2 == 0 else longest_first[-1 - i // 2] for i in range(len(run))]
        totals.append(sum(costs[t % num_m] for t in mine))
    assert max(totals) - sum(totals) / programs <= max(costs)


def test_balanced_tiles_even_the_causal_defaults():
    """The H200's causal persistent defaults at FA3 sizing: the modelled largest program total within 2% of the
    mean (tile_of's fixed rounds: 3% above it), every program with work."""
    for D, S in [(64, 1024), (64, 4096), (128, 1024), (256, 1024), (256, 4096)]:
        cfg = attention.default_config(D, S, True)
        shape = attention.Shape(16384 // S, 2048 // D, 2048 // D, S, S, D, False)
        costs = [attention.tile_cost(m * cfg.BM, S, None, 0, cfg, D) for m in range(triton.cdiv(S, cfg.BM))]
        table = attention.balanced_tiles(costs, shape.B * shape.H, 132, attention.head_group(shape, D, 2))
        offsets, tiles = table[:133], table[133:]
        totals = [sum(costs[t % len(costs)] for t in tiles[offsets[p]:offsets[p + 1]]) for p in range(132)]
        assert min(totals) > 0 and max(totals) <= 1.02 * sum(totals) / 132, (D, S)


def test_balanced_cost_of_a_tile_with_dead_consumers():
    """SKIP_DEAD: BALANCED's model counts a tile's blocks only for its rows before the end (S=4096, 192-row
    tiles: the last holds one live consumer of three); the other tiles and the model without it are unchanged."""
    cfg = attention.default_config(64, 4096, True)
    last = 21 * cfg.BM                                          # rows 4032..4223: 64 of them before the end
    whole = attention.tile_cost(last, 4096, None, 0, cfg, 64)
    live = attention.tile_cost(last, 4096, None, 0, cfg, 64, S_q=4096)
    assert live - attention.TILE_OVERHEAD == pytest.approx((whole - attention.TILE_OVERHEAD) / 3)
    assert attention.tile_cost(0, 4096, None, 0, cfg, 64, S_q=4096) == attention.tile_cost(0, 4096, None, 0, cfg, 64)


def test_balanced_needs_static_persistent_tiles():
    with pytest.raises(attention.ConfigRejected, match="BALANCED .* needs PERSISTENT=True"):
        attention.Config(BALANCED=True)
    with pytest.raises(attention.ConfigRejected, match=r"TAIL .* must be in \(0, 1\), got 1.0"):
        attention.Config(PERSISTENT=True, DYNAMIC=True, BALANCED=True, TAIL=1.0)
    for kw in (dict(), dict(BALANCED=True, DYNAMIC=True)):
        with pytest.raises(attention.ConfigRejected, match="PREFETCH .* needs BALANCED=True and DYNAMIC=False"):
            attention.Config(PERSISTENT=True, PREFETCH=True, **kw)


def test_balanced_tail_is_the_last_tiles_in_deal_order():
    """With a tail share, balanced_tiles leaves the last tiles of its deal order (the last head group's
    shortest) undealt, longest first, at most that share of the work; every program keeps dealt tiles."""
    costs = [1.0, 2.0, 3.0, 4.0]
    table = attention.balanced_tiles(costs, 6, 4, 4, tail=0.2)
    offsets = table[:5]
    dealt, tail = table[5:5 + offsets[-1]], table[5 + offsets[-1]:]
    assert sorted(dealt + tail) == list(range(24)) and all(b > a for a, b in zip(offsets, offsets[1:]))
    assert [(t // 4, t % 4) for t in tail] == [(4, 2), (5, 2), (4, 1), (5, 1), (4, 0), (5, 0)]
    assert sum(costs[t % 4] for t in tail) <= 0.2 * 60


@pytest.mark.parametrize("D,S_for,causal", [(256, 2048, False), (256, 4096, True), (256, 16384, True),
                                            (128, 1024, True), (128, 16384, False), (64, 4096, False),
                                            (64, 2048, True)])
def test_default_configs_on_the_simulator(D, S_for, causal):
    """The configuration default_config picks for S_for keys, run at 384 keys (three 128-row or two
    192-row tiles per head; persistent ones on two programs, so each walks several tiles), into a
    poisoned output."""
    cfg = attention.default_config(D, S_for, causal)
    cfg = replace(cfg, PROGRAMS=2) if cfg.PERSISTENT else cfg
    q, k, v = (torch.randn(1, 2, 512, D, dtype=torch.float16) for _ in range(3))
    check_attention_sim(q, k, v, cfg, causal=causal)


@pytest.mark.parametrize("D,causal,window,cfg", [
    (64, True, None, attention.Config(BN=64, STAGES=2, PIPELINE=True, PINGPONG=True, PERSISTENT=True, PROGRAMS=2,
                                      RELEASE_K_EARLY=True)),
    (128, False, (100, 30), attention.Config(PINGPONG=True)),
    (64, True, None, attention.Config(BM=192, STAGES=2, PIPELINE=True, PINGPONG=True, RELEASE_K_EARLY=True)),
    (64, False, (200, 0), attention.Config(BN=64, STAGES=1))],
    ids=["bn64-causal-persistent-pipelined", "window-both-sides", "b192-causal", "window-one-stage"])
def test_attention_skips_blocks_no_row_attends(D, causal, window, cfg):
    """A consumer skips the tile's blocks its own rows cannot attend (the first consumer's half of a
    64-key causal diagonal, a sliding window's edges): it still waits for each skipped block and releases
    it in turn, and with PINGPONG passes its turn. The simulator's schedules interleave the consumers; it
    reports a release that lands in an earlier phase (extra arrival) or a wait nobody ends (deadlock)."""
    left, right = attention.Features(causal=causal, window=window).bounds()
    assert attention.skip_blocks_possible(cfg, left, right, None)
    q, k, v = (torch.randn(1, 2, 512, D, dtype=torch.float16) for _ in range(3))
    check_attention_sim(q, k, v, cfg, causal=causal, window=window, schedules=3)


def test_skip_blocks_only_where_a_consumer_range_can_be_shorter():
    """Causal 128-row tiles of 128- or 256-key blocks never leave a consumer a shorter range, so those
    kernels compile without the skip loops (the defaults' machine code stays as timed)."""
    C = attention.Config
    assert not attention.skip_blocks_possible(C(), None, 0, None)
    assert not attention.skip_blocks_possible(C(BN=256), None, 0, None)
    assert not attention.skip_blocks_possible(C(BN=64), None, None, None)       # no mask at all
    assert attention.skip_blocks_possible(C(BN=64), None, 0, None)
    assert attention.skip_blocks_possible(C(BM=192), None, 0, None)
    assert attention.skip_blocks_possible(C(), 256, None, None)
    assert attention.skip_blocks_possible(C(), None, 16, None)
    assert not attention.skip_blocks_possible(C(BN=64), 256, 0, object())        # a user mask: never


def test_attention_trace_stamps_every_tile():
    """TRACE on the persistent attention kernel: each consumer stamps every tile it runs (start, Q
    landed, blocks done, stored) in time order, and nothing else; bench/attention_trace.py turns the
    stamps into phases. 8 tiles on 2 programs: 4 each."""
    from bench.attention_trace import PHASES, summary, tile_phases, traced_run
    q, k, v = (torch.randn(1, 2, 512, 64, dtype=torch.float16) for _ in range(3))
    cfg = attention.Config(PERSISTENT=True, PROGRAMS=2, P_EARLY=True)
    out, lse, trace = traced_run(q, k, v, True, cfg, backend="sim")
    ref, ref_lse = reference(q, k, v, causal=True)
    assert rel_err(out, ref) <= 1e-2 and rel_err(lse, ref_lse) <= 1e-4
    for prog in trace.tolist():
        for tiles in prog:
            stamped = [t for t in tiles if min(t) >= 0]
            assert len(stamped) == 4 and all(max(t) < 0 for t in tiles[4:])
            flat = [x for t in stamped for x in t]
            assert flat == sorted(flat)
    assert {phase for _, _, _, phase, _, _ in tile_phases(trace)} == set(PHASES)
    s = summary(trace)
    assert s["tiles"] == 2 * 2 * 4 and 0 < s["program_end_us"]["min"] <= s["program_end_us"]["max"] <= s["span_us"]
    with pytest.raises(attention.ConfigRejected, match="persistent"):
        attention.launch_args(q, k, v, out, lse, 0.125, "bhsd", attention.Config(), trace=trace)


@tlx.jit
def exp2_poly_kernel(x_ptr, y_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, exp2_poly(tl.load(x_ptr + offs)))


def test_exp2_poly_matches_exp2():
    """exp2_poly (the FMA-pipe exp) on the simulator: relative error below 1e-4 from 0 down to -125,
    and about 2^-125 below that (never a denormal or a wrapped exponent)."""
    x = torch.cat([-torch.rand(4000) * 125, torch.tensor([0.0, -0.5, -1.0, -124.9, -125.0, -200.0, -1e30]),
                   -torch.rand(89) * 1e-3])
    y = torch.full_like(x, float("nan"))
    exp2_poly_kernel[(1,)](x, y, BLOCK=4096, backend="sim")
    ref = torch.exp2(x.double())
    inside = x >= -125
    assert ((y[inside].double() - ref[inside]).abs() / ref[inside]).max() < 1e-4
    assert ((y[~inside] > 2.0 ** -126) & (y[~inside] <= 2.0 ** -125)).all()


@pytest.mark.parametrize("D,causal,cfg", [
    (64, True, attention.Config(BN=256, PERSISTENT=True, PROGRAMS=2, POLY_EXP2=True)),
    (64, False, attention.Config(BM=192, STAGES=3, PIPELINE=True, PINGPONG=True, POLY_EXP2=True)),
    (128, True, attention.Config(STAGES=3, PIPELINE=True, POLY_EXP2=True, LAZY_RESCALE=True))],
    ids=["d64-persistent-causal", "d64-b192-pipelined", "d128-pipelined-causal-lazy"])
def test_attention_poly_exp2(D, causal, cfg):
    """POLY_EXP2: a quarter of the unmasked blocks' exps by polynomial; output and LSE against float64
    (the masked diagonal blocks keep the exact exp2)."""
    S = 512
    q, k, v = (torch.randn(1, 2, S, D, dtype=torch.float16) for _ in range(3))
    out = torch.full_like(q, float("nan"))
    out, lse = attention.attention(q, k, v, causal=causal, config=cfg, out=out, backend="sim", return_lse=True)
    ref, ref_lse = reference(q, k, v, causal=causal)
    assert rel_err(out, ref) <= 1e-2
    assert rel_err(lse, ref_lse) <= 1e-4


@pytest.mark.parametrize("causal,cfg,D", [
    (False, attention.Config(STAGES=2, PIPELINE=True, PERSISTENT=True, PROGRAMS=2, O_BUFFER=True,
                             RELEASE_K_EARLY=True, Q_IN_REGS=True), 128),
    (True, attention.Config(STAGES=3, PIPELINE=True, PINGPONG=True, Q_IN_REGS=True), 128),
    # D=64's two-consumer defaults below 2048 keys with it (a GPU sweep candidate): 256-key blocks non-causal,
    # the balanced persistent tiles with the half diagonal causal
    (False, attention.Config(BN=256, PERSISTENT=True, PROGRAMS=2, O_BUFFER=True, Q_IN_REGS=True), 64),
    (True, attention.Config(PERSISTENT=True, PROGRAMS=2, O_BUFFER=True, P_EARLY=True, BALANCED=True, DYNAMIC=True,
                            HALF_DIAGONAL=True, Q_IN_REGS=True), 64)],
    ids=["persistent", "grid-pingpong-causal", "d64-wide", "d64-balanced-causal"])
def test_attention_q_in_registers(causal, cfg, D):
    """Q_IN_REGS (D=128's default, a candidate for D=64's two-consumer tiles): Q loaded once into registers
    for every loop's Q K^T."""
    q, k, v = (torch.randn(1, 2, 512, D, dtype=torch.float16) for _ in range(3))
    out = torch.full_like(q, float("nan"))
    out, lse = attention.attention(q, k, v, causal=causal, config=cfg, out=out, backend="sim", return_lse=True)
    ref, ref_lse = reference(q, k, v, causal=causal)
    assert rel_err(out, ref) <= 1e-2
    assert rel_err(lse, ref_lse) <= 1e-4


@pytest.mark.parametrize("D,cfg", [(256, attention.Config(BN=64, PIPELINE=True, Q_IN_REGS=True)),
                                   (64, attention.Config(BM=192, STAGES=3, PIPELINE=True, Q_IN_REGS=True))])
def test_attention_q_in_registers_refused_where_it_spills(D, cfg):
    q, k, v = (torch.randn(1, 2, 256, D, dtype=torch.float16) for _ in range(3))
    with pytest.raises(attention.ConfigRejected, match=f"Q_IN_REGS .* spills at head dim {D} with BM={cfg.BM}"):
        attention.attention(q, k, v, config=cfg, backend="sim")


CLUSTER_D128 = attention.Config(STAGES=2, PIPELINE=True, PERSISTENT=True, O_BUFFER=True, RELEASE_K_EARLY=True,
                                Q_IN_REGS=True, CLUSTER=2)


@pytest.mark.parametrize("D,layout,cfg", [
    (64, "bhsd", replace(CLUSTER_D128, PROGRAMS=2)),
    (64, "bshd", replace(CLUSTER_D128, PROGRAMS=6)),
    (64, "bhsd", attention.Config(PIPELINE=True, PERSISTENT=True, PINGPONG=True, LEAN_SYNC=True, PROGRAMS=4,
                                  CLUSTER=2)),
    # found by a random-Config search on the simulator: 256-key blocks arrive as two 128-row halves (kv_part
    # once took the second for a WIDE_BN end: a compile error), and PIN_WAIT's store of the row sums before
    # the release, whose warp-group bar.sync lines the group up for the remote arrive after it (rule 8 once
    # flagged that arrive)
    (64, "bhsd", replace(CLUSTER_D128, BN=256, PROGRAMS=2)),
    (128, "bhsd", replace(CLUSTER_D128, PIN_WAIT=True, P_EARLY=True, PROGRAMS=2))],
    ids=["two-ctas", "bshd-partial-round", "pingpong-lean", "bn256-halves", "pin-wait"])
def test_attention_cluster_shares_kv_by_multicast(D, layout, cfg):
    """CLUSTER=2 on the simulator: each CTA of a cluster loads half of every K/V block into both CTAs' stage
    and releases each stage in both; the snake rounds give a cluster two tiles of one head (checked by the
    result: a tile paired with another head's would read the wrong keys). Six programs over 16 tiles leave
    a partial last round; the simulator reports a stage refilled while the other CTA still reads it."""
    from tlx.sim import SimOptions
    q, k, v = (torch.randn(2, 2, 512, D, dtype=torch.float16) for _ in range(3))
    ref, ref_lse = reference(q, k, v)
    if layout == "bshd":
        q, k, v = (t.transpose(1, 2).contiguous() for t in (q, k, v))
    out = torch.full_like(q, float("nan"))
    out, lse = attention.attention(q, k, v, config=cfg, out=out, backend="sim", return_lse=True, layout=layout,
                                   sim_options=SimOptions(schedules=2))
    if layout == "bshd":
        out = out.transpose(1, 2)
    assert not torch.isnan(out).any()
    assert rel_err(out, ref) <= 1e-2
    assert rel_err(lse, ref_lse) <= 1e-4


def test_attention_cluster_is_the_default_only_where_tiles_pair():
    """CLUSTER=2 is the plain non-causal fixed-length D=128 default when the queries fill an even number of
    128-row tiles per head (a cluster's CTAs take two tiles of one head); masks, variable lengths, odd tile
    counts and the other head dims keep one CTA per cluster."""
    d = attention.default_config
    assert [d(128, S).CLUSTER for S in (512, 1024, 4096, 16384)] == [2, 2, 2, 2]
    assert d(128, 384).CLUSTER == 1 and d(128, 512, S_q=384).CLUSTER == 1 and d(128, 384, S_q=512).CLUSTER == 2
    assert d(128, 4096, causal=True).CLUSTER == 1 and d(128, 4096, plain=False).CLUSTER == 1
    assert d(128, None).CLUSTER == 1 and d(64, 4096).CLUSTER == 1 and d(256, 4096).CLUSTER == 1
    q = torch.randn(1, 3, 512, 128, dtype=torch.float16)
    args, grid, meta, cfg = attention.launch_args(q, q, q, torch.empty_like(q), torch.empty(1, 3, 512), 0.1, "bhsd")
    assert cfg.CLUSTER == 2 and meta["ctas_per_cga"] == (2, 1, 1) and grid[0] % 2 == 0


def test_attention_cluster_launch_args_and_refusals():
    """CLUSTER=2's launch: half-block K/V boxes, (2, 1, 1) clusters, doubled empty-barrier counts; refused
    with a message naming the reason for masks, variable lengths, odd row-block counts or programs, and
    configurations whose CTAs would not walk the same heads' blocks in step."""
    q, k, v = (torch.randn(1, 2, 512, 128, dtype=torch.float16) for _ in range(3))
    o, lse = torch.empty_like(q), torch.empty(1, 2, 512)
    args, grid, meta, _ = attention.launch_args(q, k, v, o, lse, 0.1, "bhsd", replace(CLUSTER_D128, PROGRAMS=4))
    assert grid == (4,) and meta["CLUSTER"] == 2 and meta["ctas_per_cga"] == (2, 1, 1)
    assert list(args[1].block_shape) == [64, 128] and list(args[0].block_shape) == [64, 128]
    for causal, kw, msg in [(True, {}, "plain non-causal"), (False, dict(window=(64, 64)), "plain non-causal"),
                            (False, dict(softcap=5.0), "plain non-causal")]:
        with pytest.raises(ConfigRejected, match=msg):
            attention.attention(q, k, v, causal=causal, config=CLUSTER_D128, backend="sim", **kw)
    with pytest.raises(ConfigRejected, match="PROGRAMS must be even, got 3"):
        attention.attention(q, k, v, config=replace(CLUSTER_D128, PROGRAMS=3), backend="sim")
    q3 = torch.randn(1, 2, 384, 128, dtype=torch.float16)
    with pytest.raises(ConfigRejected, match="even number of 128-row blocks per head .* got 3"):
        attention.attention(q3, q3, q3, config=CLUSTER_D128, backend="sim")
    for bad, msg in [(dict(BALANCED=True), "without DYNAMIC, BALANCED or SKIP_DEAD"), (dict(PIPELINE=False), "PIPELINE=True"),
                     (dict(PERSISTENT=False), "PERSISTENT=True"), (dict(SKIP_DEAD=True), "SKIP_DEAD"),
                     (dict(CLUSTER=4), "CLUSTER must be 1 or 2, got 4")]:
        with pytest.raises(ConfigRejected, match=msg):
            replace(CLUSTER_D128, **bad)


def test_attention_cluster_grid_fits_the_co_resident_clusters(monkeypatch):
    """As gemm's: a CLUSTER=2 grid larger than the clusters the GPU runs at once (the driver's count, on the
    prepared launch) is rebuilt with that many clusters; an explicit PROGRAMS is kept."""
    launches = []

    class StandIn:
        def prepare(self, *args, grid, num_warps, backend, sim_options, **meta):
            launches.append(grid)
            return SimpleNamespace(max_active_clusters=60)

    monkeypatch.setattr(attention, "attention_fwd_kernel", StandIn())
    monkeypatch.setattr(attention, "_LAST_LAUNCH", attention.LaunchCache())
    q = torch.randn(1, 8, 4096, 128, dtype=torch.bfloat16)
    for cfg in (CLUSTER_D128, replace(CLUSTER_D128, PROGRAMS=132)):
        with pytest.raises(TypeError):    # the stand-in launch is not callable: only its preparation is checked
            attention.attention(q, q, q, config=cfg)
    assert launches == [(132,), (120,), (132,)]


def test_cached_launches_hold_their_own_buffers():
    """A GPU prepared launch keeps addresses only, so the op wrappers' cached launches must keep the buffers
    that they allocate themselves alive (a freed one would be reused while the cached launch writes it): the
    tile counter and tile table of a DYNAMIC, BALANCED attention default (D=64 causal) and the stream-K
    workspace and flags."""
    q, k, v = (torch.randn(1, 2, 256, 64, dtype=torch.float16) for _ in range(3))
    assert attention.default_config(64, 256, True).DYNAMIC
    out = attention.attention(q, k, v, causal=True, backend="sim")
    assert rel_err(out, reference(q, k, v, causal=True)[0]) <= 1e-2
    counter, table = attention._LAST_LAUNCH._entry[1].buffers
    assert counter.dtype == torch.int32 and counter.numel() == 1 and counter.item() == 0
    programs = 4                                               # 4 tiles of 128 rows: one program each
    assert table.dtype == torch.int32 and table[0] == 0 and table.numel() == programs + 1 + 4
    a, b = torch.randn(640, 640, dtype=torch.bfloat16), torch.randn(640, 512, dtype=torch.bfloat16)
    cfg = gemm.Config("persistent", 128, 256, 64, 2, NO_ZERO_FILL=True, STREAM_K=True)
    c = gemm.matmul(a, b, cfg, backend="sim", programs=3)
    assert rel_err(c, a.double() @ b.double()) <= 1e-2
    ws, flags = gemm._LAST_LAUNCH._entry[1].buffers
    assert ws.dtype == torch.float32 and flags.dtype == torch.int32 and not flags.any()


@pytest.mark.parametrize("M,N,K,programs,bt,act", [
    (640, 512, 640, 3, False, None),        # 10 tiles on 3 programs: 4 stream-K tiles, three of them split
    (600, 504, 584, 3, True, "gelu"),       # partial tiles in M, N and K; B transposed; bias + gelu
    (1024, 512, 1024, 5, False, None)])     # 16 tiles on 5: 6 stream-K tiles over 5 programs
def test_stream_k_gemm(M, N, K, programs, bt, act):
    """STREAM_K: the last wave's K steps spread over every program, split tiles finished by the next
    program from the previous one's fp32 partial; the flags are left zero for the next launch, which
    must give the same result."""
    from tlx.sim import SimOptions
    a = torch.randn(M, K, dtype=torch.bfloat16)
    b = torch.randn(N, K, dtype=torch.bfloat16).T if bt else torch.randn(K, N, dtype=torch.bfloat16)
    bias = torch.randn(N, dtype=torch.bfloat16) if act else None
    cfg = gemm.Config("persistent", 128, 256, 64, 2, NO_ZERO_FILL=True, STREAM_K=True)
    tiles = -(-M // 128) * -(-N // 256)
    assert gemm.stream_k_tiles(tiles, programs) > 0
    ref = a.double() @ b.double() + (0 if bias is None else bias.double())
    ref = F.gelu(ref) if act else ref
    args, grid, meta = gemm.launch_args(a, b, torch.empty(M, N, dtype=torch.bfloat16), cfg, bias, act, programs)
    flags = args[5]
    for _ in range(2):
        c = torch.full((M, N), float("nan"), dtype=torch.bfloat16)
        args, grid, meta = gemm.launch_args(a, b, c, cfg, bias, act, programs)
        args = (*args[:5], flags, *args[6:])
        gemm.KERNELS["persistent"][grid](*args, backend="sim", sim_options=SimOptions(schedules=2), **meta)
        assert rel_err(c, ref) <= 1e-2
        assert not flags.any()


def test_gemm_config_over_shared_memory_is_rejected():
    """An explicit configuration whose ring and fp32 C tile exceed shared memory: a clear error naming
    the config and the bytes, not the compiler's out-of-resources failure at launch."""
    from tlx.errors import ConfigRejected
    a, b = torch.randn(256, 256, dtype=torch.bfloat16), torch.randn(256, 256, dtype=torch.bfloat16)
    with pytest.raises(ConfigRejected, match=r"persistent-128x256x64s3w4.*278528 bytes.*float32"):
        gemm.matmul(a, b, gemm.Config("persistent", 128, 256, 64, 3), out_dtype=torch.float32, backend="sim")


def test_gemm_trace_stamps_every_phase():
    """TRACE: each consumer stamps its start, its data-parallel end and every stream-K segment in
    order; bench/gemm_trace.py turns them into Chrome-trace phases (10 tiles on 3 programs: 6
    data-parallel, 4 stream-K over 3 shares)."""
    from bench.gemm_trace import phases, summary, traced_run
    a, b = torch.randn(640, 640, dtype=torch.bfloat16), torch.randn(640, 512, dtype=torch.bfloat16)
    cfg = gemm.Config("persistent", 128, 256, 64, 2, NO_ZERO_FILL=True, STREAM_K=True)
    c, trace = traced_run(a, b, cfg, programs=3, backend="sim")
    assert rel_err(c, a.double() @ b.double()) <= 1e-2
    for prog in trace.tolist():
        for stamps in prog:
            seen = [v for v in stamps if v >= 0]
            assert stamps[0] >= 0 and stamps[1] >= 0 and stamps[-1] >= 0 and seen == sorted(seen)
    names = {e["name"] for e in phases(trace)}
    assert {"data-parallel tiles", "segment 0: K steps", "segment 1: wait for partial"} <= names
    assert summary(trace)["span_us"] > 0


@pytest.mark.parametrize("D,causal", [(128, False), (64, True), (128, True), (64, False)])
def test_attention_lean_sync_defaults(D, causal):
    """LEAN_SYNC on the default configurations: the warpgroup_sync=False marks hold on the simulator (rule 8)
    as on the PTX (tlx/gluon/barrier_elision.py), across several schedules."""
    from tlx.sim import SimOptions
    cfg = replace(attention.default_config(D, 4096, causal), LEAN_SYNC=True)
    q, k, v = (torch.randn(1, 2, 512, D, dtype=torch.float16) for _ in range(3))
    out = torch.full_like(q, float("nan"))
    attention.attention(q, k, v, causal=causal, config=cfg, out=out, backend="sim", sim_options=SimOptions(schedules=2))
    ref = F.scaled_dot_product_attention(q.double(), k.double(), v.double(), is_causal=causal)
    assert rel_err(out, ref) <= 1e-2
