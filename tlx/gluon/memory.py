"""Lowering of local buffers: allocation, views, shared-memory loads and stores."""
from __future__ import annotations

from triton.experimental.gluon import language as gl

from . import layouts
from .rules import gluon_rule
from .values import TlxMem, index_ring


@gluon_rule("local_alloc")
def _local_alloc(ctx, shape, dtype, num, storage=None, reuse=None, layout=None):
    layout = layout or layouts.shared_for(shape, dtype)
    desc = ctx.semantic.allocate_shared(dtype, [num, *shape], layout, None)
    return TlxMem.wrap(desc, "buffers")


@gluon_rule("local_view")
def _local_view(ctx, buf, index):
    return index_ring(buf, index, ctx.semantic)


@gluon_rule("local_load")
def _local_load(ctx, buf, token=None, layout=None):
    if layout == "wgmma_a":                  # an operand kept in registers across many async_dots
        layout = layouts.wgmma_a_operand(buf.shape, buf.dtype, ctx.num_warps)
    layout = layout or layouts.blocked_for(buf.shape, ctx.num_warps)
    return ctx.semantic.shared_load(buf, layout)


@gluon_rule("local_store")
def _local_store(ctx, buf, value):
    if isinstance(value.type.layout, gl.AutoLayout):
        value = ctx.semantic.set_auto_layout(value, layouts.blocked_for(value.shape, ctx.num_warps))
    if value.dtype != buf.dtype:
        value = ctx.semantic.cast(value, buf.dtype)
    ctx.semantic.shared_store(buf, value)


@gluon_rule("local_trans")
def _local_trans(ctx, buf, dims=(1, 0)):
    return TlxMem.wrap(ctx.semantic.memdesc_trans(buf, list(dims)), "buffer")


@gluon_rule("local_slice")
def _local_slice(ctx, buf, offset, shape):
    view = buf
    for dim, (o, s) in enumerate(zip(offset, shape)):
        if (o, s) != (0, buf.shape[dim]):
            view = ctx.semantic.memdesc_slice(view, o, s, dim)
    return TlxMem.wrap(view, "buffer")


@gluon_rule("local_reshape")
def _local_reshape(ctx, buf, shape):
    return TlxMem.wrap(ctx.semantic.memdesc_reshape(buf, list(shape)), "buffer")
