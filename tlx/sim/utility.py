"""Simulator rules for utilities: thread ids, clocks, dtype facts, layout introspection."""
from __future__ import annotations

import itertools

import numpy as np
import triton.language as tl

from . import interp
from .rules import OpContext, sim_rule
from .view import VIEW


@sim_rule("thread_id")
def _thread_id(ctx: OpContext, axis):
    # Tasks run as whole warp groups, so the id along x is a vector over the task's threads.
    if axis == 0:
        return interp.make_tensor(np.arange(ctx.task.num_warps * 32, dtype=np.int32), tl.int32)
    return interp.make_tensor(np.array(0, dtype=np.int32), tl.int32)


@sim_rule("clock64")
def _clock64(ctx: OpContext):
    ctx.program.cycles += 1   # monotonic per program instance; not a model of real cycle counts
    return interp.make_tensor(np.array(ctx.program.cycles, dtype=np.int64), tl.int64)


_GLOBAL_TICKS = itertools.count(1)


@sim_rule("globaltimer")
def _globaltimer(ctx: OpContext):
    # one counter for every program of every launch (they run one after another): stamps stay ordered
    return interp.make_tensor(np.array(next(_GLOBAL_TICKS), dtype=np.int64), tl.int64)


@sim_rule("dtype_of")
def _dtype_of(ctx: OpContext, x):
    dtype = VIEW.dtype(x)
    return dtype.element_ty if isinstance(dtype, tl.pointer_type) else dtype   # a pointer's pointee, as on the GPU


@sim_rule("size_of")
def _size_of(ctx: OpContext, dtype):
    return dtype.primitive_bitwidth // 8


@sim_rule("dump_layout")
def _dump_layout(ctx: OpContext, x):
    # The simulator has no layouts; say so where the GPU backend would print its choice.
    print(f"tlx.dump_layout at {ctx.site.location}: {x!r:.80} has no layout on the sim backend "
          f"(shape {VIEW.shape(x)}, dtype {VIEW.dtype(x)})")


@sim_rule("require_layout")
def _require_layout(ctx: OpContext, x, layout):
    return x   # layouts do not change values
