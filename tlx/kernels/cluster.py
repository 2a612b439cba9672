"""What two-CTA cluster kernels share (gemm's and attention's CLUSTER=2): the CTA's rank, the cluster barrier
that opens and closes every task, and a stage release that reaches both CTAs of the cluster."""
from __future__ import annotations

import triton.language as tl

import tlx


@tlx.jit
def cluster_sync(CLUSTER: tl.constexpr):
    """CLUSTER > 1: a cluster barrier, called at the start of every task (the other CTA's mbarriers exist
    before anything reaches them) and at its end (neither CTA exits while the other may still reach into
    it). In the tasks, not the trunk: every warp of both CTAs must arrive, and the workers' warps never
    run the trunk's code."""
    if CLUSTER > 1:
        tlx.cluster_barrier()


@tlx.jit
def cluster_rank(CLUSTER: tl.constexpr):
    """This CTA's rank in its cluster (0 without clusters)."""
    rank = 0
    if CLUSTER > 1:
        rank = tlx.cluster_cta_rank()
    return rank


@tlx.jit
def release_in_cluster(bar, rank, LEAN_SYNC: tl.constexpr, CLUSTER: tl.constexpr):
    """Arrive on `bar` here and, CLUSTER=2, on its twin in the other CTA: the stage it guards is filled by
    both CTAs' producers (multicast), so neither may refill it while a consumer of either still reads it.
    LEAN_SYNC: no warp-group bar.sync before the local arrive (barrier_arrive's warpgroup_sync); the remote
    one never takes its own, the local one's (if any) already lined the warp group up."""
    tlx.barrier_arrive(bar, warpgroup_sync=not LEAN_SYNC)
    if CLUSTER > 1:
        tlx.barrier_arrive(bar, remote_cta_rank=1 - rank, warpgroup_sync=False)   # (synced by the first)
