"""Lowering of Hopper wgmma (async_dot / async_dot_wait)."""
from __future__ import annotations

from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import warpgroup_mma, warpgroup_mma_wait

from . import layouts
from .rules import gluon_rule


def accumulator(ctx, acc, shape, out_dtype):
    """The accumulator in the wgmma layout of this partition: zeros when `acc` is None."""
    layout = layouts.wgmma_layout(shape, ctx.num_warps)
    if acc is None:
        return ctx.semantic.full(list(shape), 0.0, out_dtype or gl.float32, layout), False
    if hasattr(acc, "type") and hasattr(acc.type, "tensor_type"):   # an in-flight wgmma token
        return acc, True
    return ctx.semantic.to_layout(acc, layout), True


@gluon_rule("async_dot")
def _async_dot(ctx, a, b, acc=None, use_acc=None, pred=None, mBarriers=(), two_ctas=False, force_async=False,
               input_precision=None, out_dtype=None):
    m, n = int(a.shape[0]), int(b.shape[1])
    acc, has_acc = accumulator(ctx, acc, (m, n), out_dtype)
    if isinstance(a, gl.tensor):
        parent = acc.type.tensor_type.layout if hasattr(acc.type, "tensor_type") else acc.type.layout
        a = ctx.convert(a, gl.DotOperandLayout(0, parent, layouts.k_width(a.dtype)))
    if use_acc is None:
        use_acc = has_acc
    return ctx.call(warpgroup_mma, a, b, acc, use_acc=use_acc, is_async=True)


@gluon_rule("async_dot_wait")
def _async_dot_wait(ctx, pendings, acc):
    return ctx.call(warpgroup_mma_wait, pendings, deps=[acc])
