"""Compile reports of the library GEMMs: every variant has wgmma, TMA, setmaxnreg and no spills."""
import pytest
import torch

import tlx
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
    with pytest.raises(ValueError, match=r"'a' and 'b' must be 2-D"):
        gemm.check_operands(a[0], a)
    with pytest.raises(tlx.ConfigRejected, match=r"'BM' must be 128 for 'persistent'"):
        gemm.Config("persistent", BM=64)


def test_pingpong_gemm_report():
    a, b = _operands(False, True, torch.float16)
    c = torch.empty(a.shape[0], b.shape[1], dtype=torch.float16)
    cfg = gemm.Config("pingpong", 128, 128, 64, 4)
    args, _, meta = gemm.launch_args(a, b, c, cfg)
    s = tlx.compile(gemm.KERNELS[cfg.kernel], *args, num_warps=cfg.num_warps, **meta).stats
    assert s["wgmma"] > 0 and s["tma_load"] > 0 and s["setmaxnreg"] > 0 and s["spills"] == 0 and not s["wgmma_serialized"] and not s["wgmma_desc_unset"]


@pytest.mark.parametrize("shape,kernel", [((8192, 8192, 8192), "persistent"), ((4096, 4096, 4096), "pipelined"),
                                          ((2048, 2048, 2048), "pipelined"), ((8192, 8192, 1024), "persistent"),
                                          ((4096, 4096, 512), "pingpong"), ((128, 8192, 8192), "pipelined"),
                                          ((8192, 128, 8192), "pipelined")])
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
