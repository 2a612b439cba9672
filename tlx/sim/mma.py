"""Simulator rules for Hopper wgmma: `async_dot` and `async_dot_wait`.

The product is computed at issue in fp32, but the returned accumulator's data is guarded: reading
it before an `async_dot_wait` covers its dot is reported (rule 6), as is releasing or overwriting
an operand buffer while the dot is outstanding.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import triton.language as tl

from . import interp, warpgroup_sync
from .errors import AsyncDotError, Site
from .interp import TensorHandle
from .memory import record_read
from .rules import OpContext, sim_rule
from .scheduler import Task, current_task
from .state import BarrierRef, BufferView


@dataclass
class DotRecord:
    task: Task
    site: Site
    operands: list[BufferView]
    value: np.ndarray
    done: bool = False
    reported: bool = False


class PendingAccumulator(TensorHandle):
    """An accumulator handle whose data may be read only once its async_dot is complete."""

    def __init__(self, record: DotRecord, dtype):  # no dataclass init: `data` is a guarded property
        self.record, self.dtype, self.attr = record, dtype, {}

    @property
    def data(self):
        rec = self.record
        if not rec.done and not rec.reported:
            rec.reported = True
            task = current_task()
            task.program.report(AsyncDotError(
                "the result of an async_dot is used before async_dot_wait covers it",
                task.program.site(task, "async_dot (result use)"), other=rec.site,
                details="acc = tlx.async_dot_wait(0, acc) before reading acc"))
        return rec.value

    def clone(self):
        return TensorHandle(self.data.copy(), self.dtype)


def _outstanding(task: Task) -> list[DotRecord]:
    return task.async_state.setdefault("wgmma", [])


def _operand(ctx: OpContext, x, name: str) -> tuple[np.ndarray, BufferView | None]:
    if isinstance(x, BufferView):
        record_read(ctx, x, f"async_dot operand '{name}'")
        return interp.as_float32(x.array(), x.alloc.dtype), x
    return interp.as_float32(x.handle.data, x.dtype.scalar if hasattr(x.dtype, "scalar") else x.dtype), None


def _chained_value(ctx: OpContext, acc) -> np.ndarray:
    """The accumulator input: an in-flight result of this task's own dots chains without a wait."""
    handle = acc.handle
    if isinstance(handle, PendingAccumulator) and handle.record.task is ctx.task:
        return handle.record.value
    return np.asarray(handle.data)


@sim_rule("async_dot", yields=True)
def _async_dot(ctx: OpContext, a, b, acc, use_acc, pred, mBarriers, two_ctas, force_async, input_precision,
               out_dtype):
    a_val, a_buf = _operand(ctx, a, "a")
    b_val, b_buf = _operand(ctx, b, "b")
    out_dtype = out_dtype or tl.float32
    result = np.matmul(a_val, b_val)
    if acc is not None and (use_acc is None or bool(interp.to_int(use_acc))):
        result = result + _chained_value(ctx, acc).astype(np.float32)
    record = DotRecord(ctx.task, ctx.site, [x for x in (a_buf, b_buf) if x is not None],
                       result.astype(interp.np_dtype(out_dtype)))
    for buf in record.operands:
        buf.state.dot_readers.append(record)
    _outstanding(ctx.task).append(record)
    warpgroup_sync.dot_issued(ctx, record)
    return tl.tensor(PendingAccumulator(record, out_dtype), tl.block_type(out_dtype, list(result.shape)))


@sim_rule("async_dot_wait", yields=True)
def _async_dot_wait(ctx: OpContext, pendings, acc):
    dots = _outstanding(ctx.task)
    while len(dots) > pendings:   # wgmma groups complete in issue order
        rec = dots.pop(0)
        rec.done = True
        for buf in rec.operands:
            buf.state.dot_readers.remove(rec)
    warpgroup_sync.dots_retired(ctx)
    return acc


def check_release(ctx: OpContext, bar: BarrierRef) -> None:
    """Rule 6: arriving on a barrier that guards an operand of an outstanding dot releases it too early."""
    for rec in _outstanding(ctx.task):
        for buf in rec.operands:
            if bar in buf.state.guards:
                ctx.report(AsyncDotError(
                    f"barrier_arrive on {bar.label} releases {buf.label} while the async_dot reading it is "
                    "outstanding", ctx.site, target=buf.alloc.name, slot=buf.slot, phase=bar.state.phase,
                    other=rec.site, details="call async_dot_wait before releasing the operand's buffer"))
                return
