"""Simulator rules for warp specialization: each partition (and replica) becomes a cooperative task."""
from __future__ import annotations

import types

import triton.language as tl

from ..errors import TlxCompileError
from ..language import OPS
from ..language.memory import storage_kind
from ..language.tasks import budget_check, default_warps_check
from .rules import OpContext, sim_rule
from .scheduler import Task, Wait


def task_ids(partitions) -> list[tuple[int, int]]:
    """(task index, replica) per partition: replicas of a task are consecutive functions generated from
    the same `async_task` block (same first line)."""
    ids, index, prev_line, replica = [], -1, None, 0
    for i, (fn, _) in enumerate(partitions):
        line = fn.__code__.co_firstlineno
        if i <= 1 or line != prev_line:   # partition 0 is always the default task
            index, replica = index + 1, 0
        else:
            replica += 1
        ids.append((index, replica))
        prev_line = line
    return ids


@sim_rule("warp_specialize")
def _warp_specialize(ctx: OpContext, partitions, worker_num_warps, worker_num_regs, default_num_regs):
    trunk, scheduler = ctx.task, ctx.program.scheduler
    default_warps_check(trunk.num_warps)
    if any(worker_num_regs):
        budget_check(trunk.num_warps, default_num_regs, worker_num_warps, worker_num_regs)
    warps = [trunk.num_warps, *worker_num_warps]   # the default task runs on the launch's warps
    children = []
    for (fn, args), n, (index, replica) in zip(partitions, warps, task_ids(partitions)):
        child = Task(ctx.program, index, replica, n, trunk.clock.copy())
        scheduler.spawn(child, fn, tuple(args))
        children.append(child)
    ctx.program.region = children                  # the region's tasks now hold the CTA's warps (cluster_barrier)
    scheduler.block_until(trunk, Wait(ready=lambda: all(c.done for c in children),
                                      describe=lambda: "the end of its async_tasks region", site=ctx.site,
                                      joins_children=True))
    ctx.program.region = None
    for child in children:
        trunk.clock.join(child.clock)
    trunk.release()


def _outside_split(op: str):
    def fail(*args, **kwargs):
        raise TlxCompileError(f"tlx.{op}: reached the simulator unsplit; it is only valid as "
                              "`with tlx.async_tasks(): with tlx.async_task(...):` inside a @tlx.jit kernel")
    fail.__name__ = op
    return fail


def install_task_helpers(mod: types.ModuleType) -> None:
    """Non-op names kernels use through `tlx.`: task markers, warp_spec helpers, enums."""
    from ..language import warp_spec
    from .executor import python_function

    for op in ("async_tasks", "async_task", "async_task_replica_id"):
        setattr(mod, op, _outside_split(op))
    mod.warp_spec = types.SimpleNamespace(get_bufidx_phase=python_function(warp_spec.get_bufidx_phase))
    mod.storage_kind = storage_kind
    mod.constexpr = tl.constexpr   # the splitter writes `cid: tlx.constexpr = <replica>`
    mod.OPS = OPS

    def fallback(name):  # anything else (constants, TensorDescriptor, ...) comes from the real package
        import tlx
        return getattr(tlx, name)
    mod.__getattr__ = fallback
