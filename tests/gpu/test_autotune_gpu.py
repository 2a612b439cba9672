"""A tlx kernel under triton.autotune and triton.heuristics, as a Triton JITFunction would be."""
import torch
import triton
import triton.language as tl

import tlx


@triton.autotune(configs=[triton.Config({"BLOCK": 512}, num_warps=4), triton.Config({"BLOCK": 1024}, num_warps=8)],
                 key=["n"])
@triton.heuristics({"EVEN": lambda args: args["n"] % args["BLOCK"] == 0})
@tlx.jit
def _scaled_copy(x_ptr, out_ptr, n, BLOCK: tl.constexpr, EVEN: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    if EVEN:
        tl.store(out_ptr + offs, tl.load(x_ptr + offs) * 2)
    else:
        m = offs < n
        tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=m) * 2, mask=m)


def test_autotune_and_heuristics_pick_and_run_a_config():
    for n in (1 << 20, 1_000_003):
        x = torch.randn(n, device="cuda")
        out = torch.full_like(x, float("nan"))
        _scaled_copy[lambda meta: (triton.cdiv(n, meta["BLOCK"]),)](x, out, n)
        torch.cuda.synchronize()
        assert torch.equal(out, x * 2)
