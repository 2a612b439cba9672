"""Simulator rules for Hopper clusters (a launch with `ctas_per_cga`): CTA rank and count, the cluster
barrier, and the peer CTA's twin of a shared allocation for remote arrivals and multicast TMA loads.

The CTAs of a cluster run the same kernel, so their allocations come in the same order: a barrier or
buffer in CTA r is the one with the same allocation number (`ProgramState.register`). Reaching it is
safe only between a cluster barrier after the peer's allocations (its barriers are initialized) and a
cluster barrier before the peer exits; the clocks check the first, the peer's state the second.
"""
from __future__ import annotations

import numpy as np
import triton.language as tl

from . import interp
from .errors import ClusterProtocolError
from .rules import OpContext, sim_rule
from .scheduler import Wait
from .state import BarrierRef, BufferView, ProgramState

_ENTRY_EXIT = ("call tlx.cluster_barrier() in every CTA after its barriers are allocated (in the trunk, or at the "
               "start of every async_task) and again before the kernel ends (or at the end of every async_task)")


@sim_rule("cluster_cta_rank")
def _cluster_cta_rank(ctx: OpContext):
    return interp.make_tensor(np.array(ctx.program.rank, dtype=np.int32), tl.int32)


@sim_rule("cluster_size_1d")
def _cluster_size_1d(ctx: OpContext):
    return interp.make_tensor(np.array(ctx.program.cluster.size, dtype=np.int32), tl.int32)


@sim_rule("cluster_barrier", yields=True)
def _cluster_barrier(ctx: OpContext):
    """Every thread of every CTA of the cluster arrives: outside an async_tasks region a CTA's trunk,
    inside one every task of the region (a task that finished without arriving still holds its warps,
    so the round never completes: a deadlock, as on the GPU)."""
    cluster, st = ctx.program.cluster, ctx.program.cluster.barrier
    generation = st.generation
    st.arrivers.append(ctx.task)
    st.clock.join(ctx.task.clock)
    ctx.task.release()
    _complete_round(cluster)
    ctx.program.scheduler.block_until(ctx.task, Wait(
        ready=lambda: st.generation != generation or _complete_round(cluster),
        describe=lambda: f"cluster_barrier(); arrived: {[t.label for t in st.arrivers]}, never arriving: "
                         f"{[t.label for p in cluster.programs for t in p.thread_groups() if t not in st.arrivers]}"
                         " (every task of an async_tasks region holds warps that must arrive)", site=ctx.site))
    ctx.task.clock.join(st.last_clock)


def _complete_round(cluster) -> bool:
    """Close the open round once every thread group of the cluster has arrived."""
    st = cluster.barrier
    groups = [t for p in cluster.programs for t in p.thread_groups()]
    if not st.arrivers or any(t not in st.arrivers for t in groups):
        return False
    st.generation += 1
    st.last_clock, st.clock = st.clock, type(st.clock)()
    st.arrivers = []
    return True


def peer(ctx: OpContext, rank, op: str) -> ProgramState:
    """CTA `rank` of this cluster, still running."""
    cluster, r = ctx.program.cluster, interp.to_int(rank)
    if not 0 <= r < cluster.size:
        raise ClusterProtocolError(f"{op}: CTA rank {r} is outside the cluster of {cluster.size} CTA(s)", ctx.site,
                                   details="launch with ctas_per_cga=(n, 1, 1) for a cluster of n CTAs")
    other = cluster.programs[r]
    if other.exited:
        ctx.report(ClusterProtocolError(
            f"{op} reaches CTA {r}, which has already exited: its shared memory is gone", ctx.site,
            details=_ENTRY_EXIT))
    return other


def twin(ctx: OpContext, local, other: ProgramState, op: str, what: str):
    """`other`'s allocation with the same number as `local`, ordered before this task."""
    seq = local.seq
    if seq >= len(other.allocations) or type(other.allocations[seq]) is not type(local):
        raise ClusterProtocolError(
            f"{op}: CTA {other.rank} has not allocated {what} yet, so nothing orders its initialization before "
            "this access", ctx.site, target=what, details=_ENTRY_EXIT)
    mine = other.allocations[seq]
    if not ctx.task.clock.covers_clock(mine.init_clock):
        ctx.report(ClusterProtocolError(
            f"{op} reaches {what} in CTA {other.rank}, but no cluster_barrier orders that CTA's allocation "
            "(its barrier initialization) before this access", ctx.site, target=what, details=_ENTRY_EXIT))
    return mine


def remote_barrier(ctx: OpContext, bar: BarrierRef, rank, op: str) -> BarrierRef:
    other = peer(ctx, rank, op)
    return BarrierRef(twin(ctx, bar.array, other, op, bar.label), bar.index)


def remote_buffer(ctx: OpContext, buf: BufferView, rank, op: str) -> BufferView:
    other = peer(ctx, rank, op)
    return BufferView(twin(ctx, buf.alloc, other, op, buf.label), buf.slot, buf.transforms)


@sim_rule("remote_view")
def _remote_view(ctx: OpContext, bar, rank):
    if not isinstance(bar, BarrierRef):
        raise ClusterProtocolError("remote_view: 'bar' must be one mbarrier (bars[i]); shared-memory buffers of "
                                   "other CTAs are reached through multicast loads", ctx.site)
    return remote_barrier(ctx, bar, rank, "remote_view")
