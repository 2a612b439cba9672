"""Correct kernels on the simulator match a float64 reference (fp16 inputs, poisoned outputs)."""
import time

import pytest
import torch

import kernels
import tlx.sim
from helpers import cdiv, gemm_operands, rel_err


def test_two_task_add_is_exact():
    g = torch.Generator().manual_seed(1)
    x, y = torch.randn(1000, generator=g), torch.randn(1000, generator=g)
    out = torch.full((1000,), float("nan"))
    kernels.two_task_add[(cdiv(1000, 256),)](x, y, out, 1000, BLOCK=256, backend="sim")
    assert torch.equal(out, x + y)


@pytest.mark.parametrize("M,N,K", [(128, 128, 256), (160, 128, 200)])   # the second has TMA out-of-bounds edges
def test_pipelined_gemm(M, N, K):
    BM, BN, BK = 64, 64, 32
    a, b, c, (ad, bd, cd) = gemm_operands(M, N, K, [BM, BK], [BK, BN], [BM, BN])
    kernels.pipelined_gemm[(cdiv(M, BM), cdiv(N, BN))](ad, bd, cd, K, BM=BM, BN=BN, BK=BK, S=2, backend="sim")
    assert rel_err(c, a.double() @ b.double()) <= 1e-2


def run_ws_gemm(M, N, K, schedules=1, BM=128, BN=128, BK=64, S=2):
    a, b, c, (ad, bd, cd) = gemm_operands(M, N, K, [BM // 2, BK], [BK, BN], [BM // 2, BN])
    options = tlx.sim.SimOptions(schedules=schedules)
    kernels.ws_gemm[(cdiv(M, BM), cdiv(N, BN))](ad, bd, cd, K, BM=BM, BN=BN, BK=BK, S=S, backend="sim",
                                                 sim_options=options)
    return rel_err(c, a.double() @ b.double())


def test_ws_gemm_small_under_several_schedules():
    assert run_ws_gemm(128, 128, 256, schedules=4) <= 1e-2


def test_ws_gemm_256_cube_is_fast():
    t0 = time.perf_counter()
    err = run_ws_gemm(256, 256, 256)
    elapsed = time.perf_counter() - t0
    print(f"ws_gemm 256x256x256 simulated in {elapsed:.2f} s")
    assert err <= 1e-2
    assert elapsed < 10.0


def test_launch_directly_returns_a_clean_report():
    x, y = torch.ones(64), torch.ones(64)
    out = torch.zeros(64)
    bound = kernels.two_task_add.bind((x, y, out, 64), {"BLOCK": 64})
    report = tlx.sim.launch(kernels.two_task_add, (1,), bound, 4, tlx.sim.SimOptions(schedules=3))
    assert report.ok and report.programs == 1 and report.schedules == 3
    assert torch.equal(out, x + y)
