"""Compile reports of the library GEMMs: every variant has wgmma, TMA, setmaxnreg and no spills."""
import dataclasses
import re

import pytest
import torch

import tlx
from tlx.gluon import sass
from tlx.kernels import gemm

VARIANTS = [  # (a transposed, b transposed, bias, activation, out dtype)
    (False, False, False, None, torch.float16),
    (True, False, False, None, torch.bfloat16),
    (False, True, True, "relu", torch.float16),
    (True, True, True, "gelu", torch.float16),
    (False, False, True, "silu", torch.float32),
]


def _operands(at, bt, dtype, M=512, N=384, K=256):
    a = torch.randn(K, M, dtype=dtype).T if at else torch.randn(M, K, dtype=dtype)
    b = torch.randn(N, K, dtype=dtype).T if bt else torch.randn(K, N, dtype=dtype)
    return a, b


@pytest.mark.parametrize("at,bt,bias,act,out_dtype", VARIANTS)
def test_persistent_gemm_variants_compile_clean(at, bt, bias, act, out_dtype):
    in_dtype = torch.bfloat16 if out_dtype == torch.bfloat16 else torch.float16
    a, b = _operands(at, bt, in_dtype)
    c = torch.empty(a.shape[0], b.shape[1], dtype=out_dtype)
    bb = torch.randn(b.shape[1], dtype=in_dtype) if bias else None
    M, K = a.shape
    cfg = gemm.default_config(M, b.shape[1], K, 2, c.element_size(), bias or act is not None, transposed=True)
    args, _, meta = gemm.launch_args(a, b, c, cfg, bb, act)
    s = tlx.compile(gemm.KERNELS[cfg.kernel], *args, num_warps=cfg.num_warps, **meta).stats
    assert s["wgmma"] > 0 and s["tma_load"] > 0 and s["tma_store"] > 0 and s["setmaxnreg"] > 0
    assert s["spills"] == 0 and not s["wgmma_serialized"] and not s["wgmma_desc_unset"], s


def test_operand_errors():
    a = torch.randn(64, 64, dtype=torch.float16)
    with pytest.raises(ValueError, match=r"tlx.matmul: 'activation' must be one of"):
        gemm.check_operands(a, a, activation="tanh")
    with pytest.raises(ValueError, match=r"tlx.matmul: 'bias' must be 1-D of size N=64"):
        gemm.check_operands(a, a, bias=torch.randn(32, dtype=torch.float16))
    odd = torch.randn(64, 65, dtype=torch.float16)[:, :64]    # pitch 130 bytes: TMA cannot address it
    with pytest.raises(ValueError, match=r"'a' must be row- or column-major with a 16-byte aligned"):
        gemm.check_operands(odd, a)
    with pytest.raises(ValueError, match=r"'bias' must be contiguous, got stride 2"):   # read as [0, 1, ...]
        gemm.check_operands(a, a, bias=torch.randn(128, dtype=torch.float16)[::2])
    with pytest.raises(ValueError, match=r"'a' and 'b' must be 2-D"):
        gemm.check_operands(a[0], a)
    with pytest.raises(tlx.ConfigRejected, match=r"'BM' must be 128 for 'persistent'"):
        gemm.Config("persistent", BM=64)


@pytest.mark.parametrize("kw,msg", [
    (dict(STAGES=1), "'STAGES' must be >= 2 .*one stage deadlocks"),    # the simulator's deadlock, a hang on a GPU
    (dict(BN=96), "'BN' must be a power of two >= 16, got 96"),
    (dict(BK=8), "'BK' must be a power of two >= 16, got 8"),
    (dict(kernel="pipelined", BM=32), "'BM' must be a power of two >= 64, got 32"),
    (dict(GROUP_M=0), "'GROUP_M' must be >= 1"),                         # a division by zero in grouped_tile
    (dict(num_warps=8), r"'num_warps' must be one of \(4,\) for 'persistent', got 8"),   # ptxas ran out of registers
    (dict(kernel="pipelined", num_warps=2), r"'num_warps' must be one of \(4, 8\) for 'pipelined', got 2")])
def test_config_errors(kw, msg):
    with pytest.raises(tlx.ConfigRejected, match=msg):
        gemm.Config(**kw)


def test_call_errors():
    a = torch.randn(128, 64, dtype=torch.float16)
    with pytest.raises(ValueError, match=r"'config' must be a gemm.Config, None or \"tune\", got \{'BM': 128\}"):
        gemm.matmul(a, a.T.contiguous(), {"BM": 128}, backend="sim")
    for programs in (0, -1, 1.5):                                          # -1 gave NaN outputs on the simulator
        with pytest.raises(ValueError, match=rf"'programs' must be None or an int >= 1, got {programs}"):
            gemm.matmul(a, a.T.contiguous(), programs=programs, backend="sim")


def test_out_errors():
    """A wrong `out` is refused before any launch: the kernels would store a clipped or reinterpreted C."""
    a, b = torch.randn(128, 64, dtype=torch.float16), torch.randn(64, 128, dtype=torch.float16)
    with pytest.raises(ValueError, match=r"'out' must be a torch.float16 tensor of shape \(128, 128\) .* got "
                                         r"torch.float16 \(64, 128\)"):
        gemm.matmul(a, b, out=torch.empty(64, 128, dtype=torch.float16), backend="sim")
    with pytest.raises(ValueError, match=r"'out' must be of the input dtype torch.float16 or float32, got torch.bfloat16"):
        gemm.matmul(a, b, out=torch.empty(128, 128, dtype=torch.bfloat16), backend="sim")
    with pytest.raises(ValueError, match=r"'out' must be a torch.float32 tensor .* got torch.float16"):
        gemm.matmul(a, b, out=torch.empty(128, 128, dtype=torch.float16), out_dtype=torch.float32, backend="sim")
    with pytest.raises(ValueError, match=r"'out' must be row-major .* got strides \(1, 128\)"):
        gemm.matmul(a, b, out=torch.empty(128, 128, dtype=torch.float16).T, backend="sim")
    square = torch.randn(128, 128, dtype=torch.float16)              # C = A @ B into A: every tile reads A's rows
    with pytest.raises(ValueError, match=r"'out' must not share memory with 'a'"):
        gemm.matmul(square, square.clone(), out=square, backend="sim")
    with pytest.raises(ValueError, match=r"'out' must not share memory with 'b'"):
        gemm.matmul(square.clone(), square, out=square, backend="sim")
    wide = torch.randn(128, 256, dtype=torch.float16)                # disjoint halves of one buffer are fine
    gemm.matmul(wide[:, :128].contiguous(), wide[:, :128].contiguous(), out=wide[:, 128:], backend="sim")


@pytest.mark.parametrize("M,N,K", [(0, 128, 64), (128, 0, 64), (128, 128, 0)])
@pytest.mark.parametrize("act", [None, "gelu"])
def test_empty_problems(M, N, K, act):
    """As torch.matmul: an empty C when M or N is 0, act(bias) (zeros without one) when K is 0; `out` is written."""
    a, b = torch.randn(M, K, dtype=torch.float16), torch.randn(K, N, dtype=torch.float16)
    bias = torch.randn(N, dtype=torch.float16) if act else None
    out = torch.full((M, N), float("nan"), dtype=torch.float32)
    c = gemm.matmul(a, b, out=out, bias=bias, activation=act, backend="sim")
    ref = a.double() @ b.double() + (0 if bias is None else bias.double())
    ref = torch.nn.functional.gelu(ref) if act else ref
    assert c is out and c.shape == (M, N)
    assert torch.allclose(c.double(), ref, rtol=1e-5, atol=1e-6)


def test_pingpong_gemm_report():
    a, b = _operands(False, True, torch.float16)
    c = torch.empty(a.shape[0], b.shape[1], dtype=torch.float16)
    cfg = gemm.Config("pingpong", 128, 128, 64, 4)
    args, _, meta = gemm.launch_args(a, b, c, cfg)
    s = tlx.compile(gemm.KERNELS[cfg.kernel], *args, num_warps=cfg.num_warps, **meta).stats
    assert s["wgmma"] > 0 and s["tma_load"] > 0 and s["setmaxnreg"] > 0 and s["spills"] == 0 and not s["wgmma_serialized"] and not s["wgmma_desc_unset"]


@pytest.mark.parametrize("shape,kernel", [((8192, 8192, 8192), "persistent"), ((4096, 4096, 4096), "persistent"),
                                          ((2048, 2048, 2048), "pipelined"), ((8192, 8192, 1024), "persistent"),
                                          ((4096, 4096, 512), "pingpong"), ((128, 8192, 8192), "pipelined"),
                                          ((8192, 128, 8192), "pipelined"), ((16384, 2048, 4096), "persistent")])
def test_shape_table(shape, kernel):
    assert gemm.default_config(*shape, 2, 2).kernel == kernel
    assert gemm.default_config(*shape, 2, 2, epilogue=True).kernel == "persistent"
    assert gemm.default_config(*shape, 2, 2, transposed=True).kernel == "persistent"


@pytest.mark.parametrize("shape", [(1000, 1000, 1000), (4096, 4096, 512), (128, 8192, 8192), (8192, 8192, 8192),
                                   (8192, 8192, 1024)])
@pytest.mark.parametrize("out_bytes", [2, 4])
@pytest.mark.parametrize("epilogue,transposed", [(False, False), (True, False), (False, True)])
def test_every_table_choice_fits_shared_memory(shape, out_bytes, epilogue, transposed):
    """The table's choice compiles within the shared-memory limit (an fp32 output doubles the C tile:
    the H200 refused a 278 KB launch before this check existed)."""
    cfg = gemm.default_config(*shape, 2, out_bytes, epilogue, transposed)
    a = torch.randn(256, 512, dtype=torch.float16)
    b = torch.randn(512, 384, dtype=torch.float16)
    c = torch.empty(256, 384, dtype=torch.float32 if out_bytes == 4 else torch.float16)
    args, _, meta = gemm.launch_args(a, b, c, cfg)
    s = tlx.compile(gemm.KERNELS[cfg.kernel], *args, num_warps=cfg.num_warps, **meta).stats
    assert s["shared_bytes"] <= 232448 and s["spills"] == 0 and not s["wgmma_serialized"] and not s["wgmma_desc_unset"]


def test_splitk_kernels_compile_clean():
    """Split-K on a skinny problem: the K-sliced pipelined kernel (fp32 partials by TMA) and the reduce
    kernel with an epilogue."""
    M, N, K = 128, 8192, 8192
    cfg = gemm.Config("pipelined", 128, 128, 64, 4, 8, 4, SPLIT_K=0)
    splits = cfg.splits(M, N, K, 132)
    assert splits == 2                                   # 64 tiles fill 128 of 132 SMs
    a, b = torch.empty(M, K, dtype=torch.bfloat16), torch.empty(K, N, dtype=torch.bfloat16)
    work = torch.empty(splits * M, N, dtype=torch.float32)
    descs = [tlx.TensorDescriptor.from_tensor(t, blk) for t, blk in ((a, [128, 64]), (b, [64, 128]), (work, [128, 128]))]
    s = tlx.compile(gemm.matmul_pipelined_kernel, *descs, M, N, K, 64, M, num_warps=4, BM=128, BN=128, BK=64,
                    STAGES=4, GROUP_M=8).stats
    assert s["wgmma"] > 0 and s["tma_load"] > 0 and s["tma_store"] > 0 and s["spills"] == 0 and not s["wgmma_serialized"] and not s["wgmma_desc_unset"]
    c = torch.empty(M, N, dtype=torch.bfloat16)
    s = tlx.compile(gemm.splitk_reduce_kernel, work, c, c[0], M, N, splits, M, N, num_warps=4, HAS_BIAS=True,
                    ACTIVATION="silu", BLOCK_M=32, BLOCK_N=128).stats
    assert s["spills"] == 0 and not s["wgmma_serialized"] and not s["wgmma_desc_unset"]


def test_splitk_config_errors():
    with pytest.raises(tlx.ConfigRejected, match=r"'SPLIT_K' must be 1 for 'persistent'"):
        gemm.Config("persistent", SPLIT_K=2)
    with pytest.raises(tlx.ConfigRejected, match=r"and >= 0, got -1"):
        gemm.Config("pipelined", 128, 128, SPLIT_K=-1)
    a = torch.randn(256, 128, dtype=torch.float16).T                 # column-major
    with pytest.raises(tlx.ConfigRejected, match=r"split-K takes row-major operands"):
        gemm.matmul(a, torch.randn(256, 64, dtype=torch.float16), gemm.Config("pipelined", 128, 64, SPLIT_K=2),
                    backend="sim")


def _consumer_sass(cfg: gemm.Config) -> list[str]:
    a, b = _operands(False, True, torch.float16)
    c = torch.empty(a.shape[0], b.shape[1], dtype=torch.float16)
    args, _, meta = gemm.launch_args(a, b, c, cfg)
    from tlx.gluon import sass
    instrs, _ = sass.parse(sass.disassemble(tlx.compile(gemm.KERNELS[cfg.kernel], *args, num_warps=cfg.num_warps,
                                                        **meta).asm["cubin"]))
    return [i.text for i in instrs]


def _zero_writes(ops: list[str]) -> int:
    return sum(t.startswith("CS2R") and t.endswith("SRZ") or t.startswith("MOV") and t.endswith(", RZ") for t in ops)


def _turn_to_wgmma(cfg: gemm.Config) -> list[tuple[int, int]]:
    """Per ping-pong consumer: the instructions between its turn wait (`BAR.SYNC 8|9, 256`) and its
    first HGMMA, and how many of them write zeros (the accumulator)."""
    ops = _consumer_sass(cfg)
    gaps = []
    for n, t in enumerate(ops):
        if t.startswith("BAR.SYNC") and t.endswith(("0x8, 0x100", "0x9, 0x100")):
            first = next(m for m in range(n + 1, len(ops)) if ops[m].startswith("HGMMA"))
            gaps.append((first - n - 1, _zero_writes(ops[n + 1:first])))
    assert len(gaps) == 2, gaps
    return gaps


def test_pin_prologue_keeps_the_tile_prologue_above_the_turn_wait():
    """ptxas 12.8 sank the tile prologue (grouped_tile's divisions, the accumulator zeroing) below the
    turn wait: 225 instructions between the turn and the first wgmma (128 of them zero writes, two
    paths of 64). PIN_PROLOGUE keeps the divisions above it (93 left); NO_ZERO_FILL drops the zeroing
    (94 left); both: 28."""
    plain = _turn_to_wgmma(gemm.Config("pingpong", 128, 128, 64, 5))
    pinned = _turn_to_wgmma(gemm.Config("pingpong", 128, 128, 64, 5, PIN_PROLOGUE=True))
    both = _turn_to_wgmma(gemm.Config("pingpong", 128, 128, 64, 5, PIN_PROLOGUE=True, NO_ZERO_FILL=True))
    for (n0, z0), (n1, _), (n2, z2) in zip(plain, pinned, both):
        assert n1 < n0 / 2 and n2 < n1 / 2, (plain, pinned, both)
        assert z0 >= 128 and z2 == 0


@pytest.mark.parametrize("cfg", [gemm.Config("persistent", 128, 256, 64, 3, 16),
                                 gemm.Config("pingpong", 128, 128, 64, 5)], ids=lambda c: c.kernel)
def test_no_zero_fill_zeroes_the_accumulator_once(cfg):
    """The first wgmma of a tile ignores the accumulator (use_acc = k > 0, the `UP` operand of the
    HGMMA), so the consumers zero it once before their tile loop: one set of CS2R per consumer instead
    of two per consumer and tile."""
    plain, noacc0 = _consumer_sass(cfg), _consumer_sass(dataclasses.replace(cfg, NO_ZERO_FILL=True))
    per_set = 64                          # CS2R (two registers each): a 64x256 or 128x128 fp32 accumulator
    assert _zero_writes(plain) >= 4 * per_set and _zero_writes(noacc0) <= 2 * per_set + 2
    assert any(t.startswith("HGMMA") and t.endswith(("UP0", "UP1", "UP2", "UP3")) for t in noacc0)


def test_scheduling_option_names_and_rejections():
    assert gemm.Config("pingpong", 128, 128, 64, 5, PIN_PROLOGUE=True, NO_ZERO_FILL=True).name() == \
        "pingpong-128x128x64s5w4-pin-noacc0"
    assert gemm.Config("persistent", 128, 256, 64, 3, 16).name() == "persistent-128x256x64s3w4-g16"
    with pytest.raises(tlx.ConfigRejected, match=r"'PIN_PROLOGUE' is the pingpong kernel's, got 'persistent'"):
        gemm.Config("persistent", PIN_PROLOGUE=True)
    with pytest.raises(tlx.ConfigRejected, match=r"'NO_ZERO_FILL' needs a persistent kernel, got 'pipelined'"):
        gemm.Config("pipelined", 128, 128, NO_ZERO_FILL=True)


@pytest.mark.parametrize("cfg", [gemm.Config("pingpong", 128, 128, 64, 2, PIN_PROLOGUE=True),
                                 gemm.Config("pingpong", 128, 128, 64, 2, PIN_PROLOGUE=True, NO_ZERO_FILL=True),
                                 gemm.Config("persistent", 128, 128, 64, 2, NO_ZERO_FILL=True)], ids=lambda c: c.name())
@pytest.mark.parametrize("act", [None, "relu"])
def test_scheduling_options_on_the_simulator(cfg, act):
    """Few programs, so each consumer walks several tiles: with NO_ZERO_FILL the previous tile's
    (bias-added, activated) accumulator is what the next tile's first wgmma must ignore."""
    a = torch.randn(384, 136, dtype=torch.float16)              # partial K tile
    b = torch.randn(136, 640, dtype=torch.float16)
    bias = torch.randn(640, dtype=torch.float16) if act else None
    c = torch.full((384, 640), float("nan"), dtype=torch.float16)
    gemm.matmul(a, b, cfg, out=c, bias=bias, activation=act, backend="sim", programs=2)
    ref = a.double() @ b.double() + (0 if bias is None else bias.double())
    ref = torch.relu(ref) if act else ref
    assert ((c.double() - ref).norm() / ref.norm()).item() <= 1e-2


@pytest.mark.parametrize("cfg", [gemm.Config("persistent", 128, 256, 64, 3, 16, NO_ZERO_FILL=True, CLUSTER=2),
                                 gemm.Config("persistent", 128, 256, 64, 4, 16, NO_ZERO_FILL=True, LEAN_SYNC=True,
                                             EPI_SPLIT=2, CLUSTER=2)], ids=lambda c: c.name())
def test_cluster_gemm_compiles_with_multicast_loads_and_remote_arrives(cfg):
    """CLUSTER=2 through the Gluon lowering and the PTX pass (tlx/gluon/cluster_ptx.py): B's two halves as
    multicast TMA loads (mask 0b11), each consumer's B release also arrives on the other CTA's barrier,
    and every task opens and closes with a cluster barrier; ptxas takes it without spills. (Not yet run
    on a GPU: the cluster launch is refused there until it is.)"""
    a, b = _operands(False, False, torch.bfloat16)
    c = torch.empty(a.shape[0], b.shape[1], dtype=torch.bfloat16)
    args, _, meta = gemm.launch_args(a, b, c, cfg, programs=132)
    k = tlx.compile(gemm.KERNELS[cfg.kernel], *args, num_warps=cfg.num_warps, **meta)
    assert (k.stats["multicast_load"], k.stats["remote_arrive"], k.stats["cluster_barrier"]) == (2, 4, 6)
    assert len(re.findall(r"\.multicast::cluster [^;]*, 3;", k.asm["ptx"])) == 2            # both CTAs' mask
    assert len(re.findall(r"mapa\.shared::cluster\.u32[^;]*;[^;]*mbarrier\.arrive\.shared::cluster", k.asm["ptx"])) == 4
    sass_ops = [i.text for i in sass.parse(sass.disassemble(k.asm["cubin"]))[0]]
    assert sum("UTMALDG.2D.MULTICAST" in t for t in sass_ops) == 2
    assert sum(t.startswith("SYNCS.ARRIVE.TRANS64.RED") or " SYNCS.ARRIVE.TRANS64.RED" in t for t in sass_ops) >= 4
    assert k.stats["spills"] == 0 and k.stats["wgmma"] > 0 and not k.stats["wgmma_desc_unset"]


def test_cluster_ptx_pass_rewrites_only_marked_operations():
    from tlx.gluon import cluster_ptx
    load = ("\t@%p1 cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%r1], "
            "[%rd2, {%r3, %r4}], [%r5];")
    arrive = "\t@%p2 mbarrier.arrive.shared::cta.b64 _, [%r6];"
    ptx = "\n".join([load, f"// {cluster_ptx.MULTICAST_BEGIN} 3", load, f"// {cluster_ptx.MULTICAST_END}", load,
                     arrive, f"// {cluster_ptx.REMOTE_ARRIVE} %r9", arrive, arrive])
    out = cluster_ptx.rewrite(ptx).splitlines()
    assert out[0] == load and out[4] == load and out[5] == arrive and out[8] == arrive
    assert out[2].endswith("bytes.multicast::cluster [%r1], [%rd2, {%r3, %r4}], [%r5], 3;")
    assert "mapa.shared::cluster.u32 %tlx_remote1, %r6, %r9;" in out[7]
    assert "@%p2 mbarrier.arrive.shared::cluster.b64 _, [%tlx_remote1];" in out[7]
    with pytest.raises(tlx.TlxCompileError, match="no mbarrier.arrive followed its marker"):
        cluster_ptx.rewrite(f"// {cluster_ptx.REMOTE_ARRIVE} %r9\n\tret;")
    assert cluster_ptx.rewrite(load) == load                               # unmarked modules pass through
