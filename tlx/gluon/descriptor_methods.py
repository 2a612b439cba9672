"""Triton's tensor-descriptor methods on the Gluon backend: `desc.load(offsets)` and
`desc.store(offsets, value)`, synchronous TMA copies through a shared-memory tile, lowered as
Triton lowers them (its TMA lowering pass). Gluon's descriptor has no methods, so the code generator
binds these when a kernel reads `.load` or `.store` of one (semantic.TlxCodeGenerator.get_Attribute)."""
from __future__ import annotations

from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import fence_async_shared, mbarrier, tma

from ..errors import TlxCompileError, TlxUnsupported
from . import layouts
from ._triton_compat import builtin, gl_core
from .rules import Ctx

def _offsets(op: str, desc, offsets) -> list:
    offsets = list(offsets.values if hasattr(offsets, "values") else offsets)
    if len(offsets) != len(desc.block_shape):
        raise TlxCompileError(f"tl.tensor_descriptor.{op}: 'offsets' must hold {len(desc.block_shape)} offsets "
                              f"(one per block dimension), got {len(offsets)}")
    return [gl_core._unwrap_if_constexpr(o) for o in offsets]


def load(ctx: Ctx, desc, offsets):
    """One block into registers: TMA into a fresh tile, wait on a fresh mbarrier, read the tile."""
    offsets = _offsets("load", desc, offsets)
    tile = ctx.call(gl.allocate_shared_memory, desc.dtype, desc.block_shape, desc.layout)
    bar = ctx.call(gl.allocate_shared_memory, gl.int64, [1], mbarrier.MBarrierLayout())
    ctx.call(mbarrier.init, bar, count=1)
    ctx.call(mbarrier.expect, bar, desc.block_type.nbytes)
    ctx.call(tma.async_copy_global_to_shared, desc, offsets, bar, tile)
    ctx.call(mbarrier.wait, bar, 0)
    ctx.call(mbarrier.invalidate, bar)
    return ctx.semantic.shared_load(tile, layouts.blocked_for(desc.block_shape, ctx.num_warps))


def store(ctx: Ctx, desc, offsets, value):
    """One block from registers: write a fresh tile, TMA it out, wait until the tile is read."""
    offsets = _offsets("store", desc, offsets)
    if list(value.shape) != list(desc.block_shape):
        raise TlxCompileError(f"tl.tensor_descriptor.store: 'value' must have the descriptor's block shape "
                              f"{list(desc.block_shape)}, got {list(value.shape)}")
    value = ctx.convert(value, layouts.blocked_for(value.shape, ctx.num_warps))
    if value.dtype != desc.dtype:
        value = ctx.semantic.cast(value, desc.dtype)
    tile = ctx.call(gl.allocate_shared_memory, desc.dtype, desc.block_shape, desc.layout, value)
    ctx.call(fence_async_shared)
    ctx.call(tma.async_copy_shared_to_global, desc, offsets, tile)
    ctx.call(tma.store_wait, 0)


# the other methods of Triton's descriptors (atomics, gather, scatter) have no lowering here
METHODS = {"load": load, "store": store}


def bound_method(desc, name: str):
    """`desc.<name>` as a Gluon builtin with `desc` bound."""
    if name not in METHODS:
        raise TlxUnsupported(f"tl.tensor_descriptor.{name}", "gluon",
                             f"only {' and '.join('.' + m for m in METHODS)} are lowered; use "
                             "tlx.async_descriptor_load / async_descriptor_store for explicit copies")
    method = METHODS[name]

    @builtin
    def call(*args, _semantic=None, _generator=None):
        return method(Ctx(_semantic, _generator), desc, *args)
    call.__name__ = name
    return call
