"""Lowering of mbarriers, named barriers (inline PTX: Gluon 3.6 has no builtin) and fences."""
from __future__ import annotations

from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import fence_async_shared, mbarrier

from ..errors import TlxCompileError, expected
from . import barrier_elision, cluster_ptx, layouts
from .rules import gluon_rule
from .values import TlxMem


def inline_ptx(ctx, asm: str, dtype=gl.int32, constraint: str = "=r"):
    """A side-effecting PTX statement with one dummy (or real) scalar result."""
    return ctx.call(gl.inline_asm_elementwise, asm, constraint, [], dtype=dtype, is_pure=False, pack=1)


@gluon_rule("alloc_barriers")
def _alloc_barriers(ctx, num_barriers, arrive_count=1):
    bars = ctx.semantic.allocate_shared(gl.int64, [num_barriers, 1], layouts.MBarrierLayout(), None)
    for i in range(num_barriers):
        ctx.call(mbarrier.init, ctx.semantic.memdesc_index(bars, ctx.semantic.to_tensor(i)), arrive_count)
    return TlxMem.wrap(bars, "barriers", arrive_count)


def _pred(ctx, pred):
    return True if pred is None else pred


@gluon_rule("barrier_expect_bytes")
def _barrier_expect_bytes(ctx, bar, nbytes, pred=None):
    ctx.call(mbarrier.expect, bar, nbytes, pred=_pred(ctx, pred))


def mark_no_warpgroup_sync(ctx, warpgroup_sync, tma_load: bool = False) -> None:
    """A PTX comment that barrier_elision finds: the bar.sync Membar puts next may go. Outside one warp
    group (or before a TMA load) only a kept barrier can prove that, not a retired wgmma."""
    if not getattr(warpgroup_sync, "value", warpgroup_sync):
        inline_ptx(ctx, barrier_elision.marker_asm(barrier_proof_only=tma_load or ctx.num_warps != 4))


@gluon_rule("barrier_wait")
def _barrier_wait(ctx, bar, phase, pred=None, warpgroup_sync=True):
    mark_no_warpgroup_sync(ctx, warpgroup_sync)
    ctx.call(mbarrier.wait, bar, phase, pred=_pred(ctx, pred), deps=())


@gluon_rule("barrier_arrive")
def _barrier_arrive(ctx, bar, arrive_count=1, remote_cta_rank=None, pred=None, warpgroup_sync=True):
    mark_no_warpgroup_sync(ctx, warpgroup_sync)
    if remote_cta_rank is not None:              # the PTX pass turns the arrive into one on CTA `rank`'s twin
        rank = ctx.semantic.to_tensor(remote_cta_rank) if not hasattr(remote_cta_rank, "type") else remote_cta_rank
        ctx.call(gl.inline_asm_elementwise, cluster_ptx.remote_arrive_asm(), "=r,r", [rank], dtype=gl.int32,
                 is_pure=False, pack=1)
    ctx.call(mbarrier.arrive, bar, count=arrive_count, pred=_pred(ctx, pred))


def _check_free_id(op: str, id: int) -> None:
    from . import tasks
    low = tasks.RESERVED_NAMED_BARRIERS
    if id < low:
        raise TlxCompileError(expected(op, "id", f"in [{low}, 15]", id,
                                       f"ids 0..{low - 1} are used by the lowering of this warp-specialized region"))


@gluon_rule("named_barrier_wait")
def _named_barrier_wait(ctx, id, num_threads):
    _check_free_id("named_barrier_wait", id)
    inline_ptx(ctx, f"bar.sync {id}, {num_threads}; mov.u32 $0, 0;")


@gluon_rule("named_barrier_arrive")
def _named_barrier_arrive(ctx, id, num_threads):
    _check_free_id("named_barrier_arrive", id)
    inline_ptx(ctx, f"bar.arrive {id}, {num_threads}; mov.u32 $0, 0;")


@gluon_rule("fence")
def _fence(ctx, scope):
    if scope == "async_shared":
        ctx.call(fence_async_shared)
    else:
        inline_ptx(ctx, f"fence.acq_rel.{scope}; mov.u32 $0, 0;")


@gluon_rule("fence_async_shared")
def _fence_async_shared(ctx):
    ctx.call(fence_async_shared)
