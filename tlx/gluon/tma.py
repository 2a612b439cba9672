"""Lowering of TMA tile copies and pointer-based cp.async copies."""
from __future__ import annotations

from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import async_copy, tma

from ..errors import TlxUnsupported
from . import cluster_ptx, layouts
from .barriers import inline_ptx, mark_no_warpgroup_sync
from .rules import gluon_rule


@gluon_rule("async_descriptor_load")
def _async_descriptor_load(ctx, desc, buf, offsets, barrier, pred=None, cache_modifier="", eviction_policy="",
                           multicast_targets=None, two_ctas=False, warpgroup_sync=True):
    mark_no_warpgroup_sync(ctx, warpgroup_sync, tma_load=True)
    ranks = [getattr(r, "value", r) for r in multicast_targets or ()]
    if not all(isinstance(r, int) and 0 <= r < 16 for r in ranks):
        raise TlxUnsupported("async_descriptor_load", "gluon", f"multicast_targets must be compile-time CTA ranks "
                             f"(0..15) on the GPU, got {multicast_targets!r}")
    if ranks:                                        # the PTX pass makes every load between the markers multicast
        inline_ptx(ctx, cluster_ptx.multicast_begin_asm(sum(1 << r for r in set(ranks))))
    ctx.call(tma.async_copy_global_to_shared, desc, list(offsets), barrier, buf, pred=True if pred is None else pred)
    if ranks:
        inline_ptx(ctx, cluster_ptx.multicast_end_asm())


@gluon_rule("async_descriptor_store")
def _async_descriptor_store(ctx, desc, buf, offsets, eviction_policy="", store_reduce=""):
    ctx.call(tma.async_copy_shared_to_global, desc, list(offsets), buf)


@gluon_rule("async_descriptor_store_wait")
def _async_descriptor_store_wait(ctx, pendings):
    ctx.call(tma.store_wait, pendings)


# What async_load and commit groups return where Meta TLX returns a token: an empty tuple, a value with no
# IR, so kernels can still collect "tokens" in lists (a kernel's list is a tuple of values; None is not one)
NO_TOKEN = gl.tuple([])


@gluon_rule("async_load")
def _async_load(ctx, ptrs, buf, mask=None, other=None, cache_modifier="", eviction_policy="", is_volatile=False,
                bulk=False, bulk_size=None, barrier=None):
    layout = layouts.blocked_for(ptrs.shape, ctx.num_warps)
    ptrs = ctx.semantic.to_layout(ptrs, layout)
    if mask is not None and hasattr(mask, "type") and mask.type.is_block():
        mask = ctx.semantic.to_layout(mask, layout)
    ctx.call(async_copy.async_copy_global_to_shared, buf, ptrs, mask=mask, cache_modifier=cache_modifier,
             eviction_policy=eviction_policy, volatile=is_volatile)
    return NO_TOKEN


@gluon_rule("async_load_commit_group")
def _async_load_commit_group(ctx, tokens=()):
    ctx.call(async_copy.commit_group)
    return NO_TOKEN


@gluon_rule("async_load_wait_group")
def _async_load_wait_group(ctx, pendings, tokens=()):
    ctx.call(async_copy.wait_group, pendings)


def make_descriptor(ctx, base, shape, strides, block_shape):
    """Device-side TMA descriptor (`tl.make_tensor_descriptor`); needs `triton.set_allocator`."""
    layout = layouts.shared_for(block_shape, base.dtype.element_ty)
    return ctx.call(tma.make_tensor_descriptor, base, list(shape), list(strides), list(block_shape), layout)
