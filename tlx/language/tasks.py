"""Warp specialization: `with tlx.async_tasks():` regions of `with tlx.async_task(...)` blocks.

The frontend (`tlx.frontend.split`) rewrites each region into one `warp_specialize` call whose
partitions are generated functions; the context managers below only exist so that using them
outside `@tlx.jit` fails with a clear message."""
from __future__ import annotations

from dataclasses import dataclass

from ..errors import TlxCompileError, check, expected
from ._registry import tlx_op

MAX_REGS_PER_THREAD = 256
REGISTER_FILE = 64 * 1024  # 32-bit registers per SM available to one CTA


def _outside(op: str):
    raise TlxCompileError(f"tlx.{op}: called outside a @tlx.jit kernel; decorate the kernel with @tlx.jit "
                          "(not @triton.jit)")


def async_tasks():
    """Open a warp-specialized region (only inside @tlx.jit)."""
    _outside("async_tasks")


def async_task(*args, **kwargs):
    """One task of a warp-specialized region (only inside @tlx.jit)."""
    _outside("async_task")


def async_task_replica_id():
    """Compile-time replica index of the current task (only inside @tlx.jit)."""
    _outside("async_task_replica_id")


@dataclass(frozen=True)
class TaskSpec:
    """One partition as the frontend found it: `num_warps=None` marks the default task."""
    num_warps: int | None
    num_regs: int | None
    replicate: int
    line: int

    @property
    def is_default(self) -> bool:
        return self.num_warps is None


def check_task_spec(spec: TaskSpec) -> None:
    where = f" (kernel line {spec.line})"
    if spec.num_warps is not None:
        n = spec.num_warps
        check(isinstance(n, int) and n >= 1 and n & (n - 1) == 0,
              lambda: expected("async_task", "num_warps", "a power of two >= 1", n) + where)
    r = spec.num_regs
    check(r is None or (isinstance(r, int) and r % 8 == 0 and 24 <= r <= MAX_REGS_PER_THREAD),
          lambda: expected("async_task", "num_regs", f"a multiple of 8 in [24, {MAX_REGS_PER_THREAD}]", r) + where)
    check(isinstance(spec.replicate, int) and spec.replicate >= 1,
          lambda: expected("async_task", "replicate", "an int >= 1", spec.replicate) + where)


@tlx_op
def warp_specialize(v, partitions, worker_num_warps, worker_num_regs, default_num_regs=None):
    """Run `partitions[0]` (the default task) on the kernel's warps and each other partition on its own
    warps. Emitted by the frontend; not called by users.

    Register budget: sum over partitions of warps * 32 * regs <= 64K, with worker warps padded to
    whole warp groups; the default task gets the rest."""
    check(len(worker_num_warps) == len(partitions) - 1 == len(worker_num_regs),
          lambda: f"tlx.async_tasks: internal partition count mismatch {len(partitions)}")
    requested = [r for r in worker_num_regs if r]
    check(not requested or len(requested) == len(worker_num_regs), lambda: expected(
        "async_task", "num_regs", "given for every non-default task or for none", list(worker_num_regs)))
    # the register budget depends on the kernel's num_warps: each backend calls budget_check


def default_warps_check(num_warps: int) -> None:
    """The default task runs on the kernel's num_warps, and Gluon's warp specialization needs whole warp
    groups there (its own error was a bare "error encountered during parsing" at num_warps 1 or 2)."""
    check(num_warps % 4 == 0, lambda: expected(
        "async_tasks", "num_warps", "a multiple of 4 for a kernel with async tasks (the default task runs on the "
        "kernel's warps, in whole warp groups)", num_warps, "launch with num_warps=4"))


def budget_check(num_warps: int, default_regs: int | None, worker_warps, worker_regs) -> int:
    """The default task's registers per thread; raises if the request does not fit the register file."""
    def groups(w):  # worker warps are padded to whole warp groups
        return -(-w // 4) * 4
    used = sum(groups(w) * 32 * r for w, r in zip(worker_warps, worker_regs))
    left = (REGISTER_FILE - used) // (num_warps * 32) // 8 * 8
    want = default_regs if default_regs is not None else min(left, MAX_REGS_PER_THREAD)
    check(24 <= want <= left, lambda: expected(
        "async_task", "num_regs", f"a request that leaves the default task >= 24 registers per thread "
        f"within {REGISTER_FILE} per CTA",
        f"workers {[f'{w} warps x {r}' for w, r in zip(worker_warps, worker_regs)]} = {used} registers, "
        f"leaving {left} per thread for the default task's {num_warps} warps", "lower num_regs or num_warps"))
    return want
