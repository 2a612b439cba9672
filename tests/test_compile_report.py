"""Compile reports for sm_90a with no GPU: the instructions each kernel must contain."""
import re

import pytest
import torch

import tlx
from tlx.kernels.vector_add import two_task_add
from tlx.kernels import gemm


def _report(cfg, dtype=torch.float16, target="sm_90a"):
    a = torch.randn(512, 256, dtype=dtype)
    b = torch.randn(256, 512, dtype=dtype)
    c = torch.empty(512, 512, dtype=dtype)
    args, _, meta = gemm.launch_args(a, b, c, cfg)
    return tlx.compile(gemm.KERNELS[cfg.kernel], *args, target=target, num_warps=cfg.num_warps, **meta)


def test_pipelined_gemm_uses_tma_and_wgmma():
    r = _report(gemm.Config("pipelined", 128, 256, 64, 3, 8, 8))
    s = r.stats
    assert s["wgmma"] > 0 and s["tma_load"] > 0 and s["tma_store"] > 0 and s["mbarrier_wait"] > 0
    assert s["spills"] == 0 and not s["wgmma_serialized"] and not s["wgmma_desc_unset"]
    assert "ttgir" in r.asm and ".target sm_90a" in r.asm["ptx"]


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
def test_warp_specialized_gemm_report(dtype):
    r = _report(gemm.Config("ws"), dtype)
    s = r.stats
    assert s["wgmma"] > 0 and s["tma_load"] > 0 and s["mbarrier_wait"] > 0
    assert s["setmaxnreg"] > 0, "the consumer tasks asked for 232 registers"
    assert s["spills"] == 0 and not s["wgmma_serialized"] and not s["wgmma_desc_unset"]
    assert 0 < s["shared_bytes"] <= 232448
    assert re.search(r"setmaxnreg.inc.sync.aligned.u32\s+232", r.asm["ptx"])


def test_loop_carries_the_wgmma_accumulator_without_conversions():
    ttgir = _report(gemm.Config("ws")).asm["ttgir"]
    loop = ttgir[ttgir.index("iter_args"):]
    loop = loop[:loop.index("scf.yield")]
    assert "#mma" in loop and "convert_layout" not in loop


def test_two_task_vector_add_compiles_for_hopper_and_blackwell():
    x, y, o = torch.randn(4096), torch.randn(4096), torch.empty(4096)
    for target in ("sm_90a", "sm_100a"):
        r = tlx.compile(two_task_add, x, y, o, 4096, BLOCK=1024, target=target)
        assert r.stats["spills"] == 0 and not r.stats["wgmma_serialized"] and not r.stats["wgmma_desc_unset"]
        assert "warp_specialize" in r.asm["ttgir"]
