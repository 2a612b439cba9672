"""Lowering of warp-specialized regions to `gl.warp_specialize` (setmaxnreg + named barriers)."""
from __future__ import annotations

from triton.experimental.gluon import language as gl

from ..errors import TlxCompileError
from ..language.tasks import budget_check, default_warps_check
from .rules import gluon_rule

# Gluon's lowering of a region uses hardware barriers 0 (CTA), 1 (region) and 2.. (one per worker):
# user named barriers must stay above them.
RESERVED_NAMED_BARRIERS = 1


@gluon_rule("warp_specialize", raw=("partitions",))
def _warp_specialize(ctx, partitions, worker_num_warps, worker_num_regs, default_num_regs=None):
    # dtypes and other compile-time values travel as constexprs
    partitions = [(fn, tuple(a if hasattr(a, "_flatten_ir") else gl.constexpr(a) for a in args))
                  for fn, args in partitions]
    for index, (fn, args) in enumerate(partitions[1:], start=1):
        for name, value in zip(getattr(fn, "arg_names", []), args):
            if isinstance(value, gl.tensor) and value.type.is_block():
                raise TlxCompileError(
                    f"tlx.async_task: task {index} captures '{name}', a register tensor of shape {list(value.shape)}; "
                    "non-default tasks may capture only scalars, buffers, barriers and descriptors "
                    "(compute it inside the task, or pass it through shared memory)")
    default_warps_check(ctx.num_warps)
    regs = list(worker_num_regs)
    if not any(regs):
        # no request: no setmaxnreg; Gluon needs a number, so give workers what an even split leaves
        regs = [_even_share(ctx.num_warps, worker_num_warps)] * len(regs)
    else:
        budget_check(ctx.num_warps, default_num_regs, worker_num_warps, regs)
    global RESERVED_NAMED_BARRIERS
    outer, RESERVED_NAMED_BARRIERS = RESERVED_NAMED_BARRIERS, 2 + len(worker_num_warps)
    try:   # the tasks are code-generated inside this call: named-barrier rules see the reservation
        return ctx.call(gl.warp_specialize, [(fn, tuple(args)) for fn, args in partitions], list(worker_num_warps),
                        regs, _generator=ctx.generator)
    finally:
        RESERVED_NAMED_BARRIERS = outer


def _even_share(default_warps: int, worker_warps) -> int:
    groups = default_warps + sum(-(-w // 4) * 4 for w in worker_warps)
    return min(256, 65536 // (groups * 32) // 8 * 8)
