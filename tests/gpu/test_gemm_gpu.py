"""GEMM kernels on the GPU against an fp32 reference: fresh random data, poisoned outputs."""
import pytest
import torch

from tlx.kernels import gemm

SHAPES = [(4096, 4096, 4096), (1000, 1000, 1000), (4096, 4000, 1000), (300, 264, 136)]
DTYPES = [torch.float16, torch.bfloat16]
CONFIGS = [gemm.Config("ws"), gemm.Config("ws", 128, 128, 64, 4), gemm.Config("pipelined", 128, 256, 64, 3, 8, 8)]


def rel_err(out, ref):
    return ((out.float() - ref).norm() / ref.norm()).item()


@pytest.mark.parametrize("cfg", CONFIGS, ids=lambda c: f"{c.kernel}-{c.BM}x{c.BN}x{c.BK}s{c.STAGES}")
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_matmul_matches_reference(shape, dtype, cfg):
    M, N, K = shape
    a = torch.randn(M, K, device="cuda", dtype=dtype)
    b = torch.randn(K, N, device="cuda", dtype=dtype)
    c = torch.full((M, N), float("nan"), device="cuda", dtype=dtype)
    gemm.matmul(a, b, cfg, out=c)
    torch.cuda.synchronize()
    ref = a.double().matmul(b.double()).float()
    assert not torch.isnan(c).any(), "some outputs were never written"
    assert rel_err(c, ref) <= 1e-2
