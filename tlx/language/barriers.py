"""mbarriers, named barriers and fences."""
from __future__ import annotations

from ..errors import check, expected
from ._registry import check_barrier, check_int, check_kind, tlx_op


@tlx_op
def alloc_barriers(v, num_barriers, arrive_count=1):
    """An array of `num_barriers` mbarriers in shared memory, each initialised with `arrive_count`."""
    check_int("alloc_barriers", "num_barriers", num_barriers, lo=1)
    check_int("alloc_barriers", "arrive_count", arrive_count, lo=1)


@tlx_op(aliases={"size": "nbytes"})
def barrier_expect_bytes(v, bar, nbytes, pred=None):
    """Arm `bar` for `nbytes` of TMA data in its current phase (counts as one arrival)."""
    check_barrier(v, "barrier_expect_bytes", "bar", bar)
    check_int("barrier_expect_bytes", "nbytes", nbytes, lo=0)


@tlx_op
def barrier_wait(v, bar, phase, pred=None, warpgroup_sync=True):
    """Block until the phase of `bar` with parity `phase` completes (a fresh barrier has parity 1 done).
    `warpgroup_sync=False`: see `barrier_arrive`."""
    check_barrier(v, "barrier_wait", "bar", bar)
    check_kind(v, "barrier_wait", "phase", phase, ("scalar",))
    check_warpgroup_sync("barrier_wait", warpgroup_sync)


@tlx_op
def barrier_arrive(v, bar, arrive_count=1, remote_cta_rank=None, pred=None, warpgroup_sync=True):
    """Arrive on `bar` (`arrive_count` times); one thread per warp group arrives; none where `pred` is false.
    `warpgroup_sync=False` (tlx's own): no warp-group barrier before the op. Right when the buffers it
    releases were read only by wgmmas that `async_dot_wait` retired (all four warps issue a wgmma, so
    one warp seeing it retired means every warp is past it), as CUTLASS's consumer release. The
    compiler checks the PTX and refuses a mark where an ordinary shared-memory access or an mbarrier
    wait comes after the last barrier or retired wgmma (tlx/gluon/barrier_elision.py)."""
    check_barrier(v, "barrier_arrive", "bar", bar)
    check_int("barrier_arrive", "arrive_count", arrive_count, lo=1)
    if remote_cta_rank is not None:                  # the same barrier in another CTA of the cluster
        check_kind(v, "barrier_arrive", "remote_cta_rank", remote_cta_rank, ("scalar",))
        check(pred is None, lambda: expected("barrier_arrive", "pred", "None with remote_cta_rank (a predicated "
                                             "remote arrive is not lowered)", pred))
    if pred is not None:
        check_kind(v, "barrier_arrive", "pred", pred, ("scalar",))
    check_warpgroup_sync("barrier_arrive", warpgroup_sync)


def check_warpgroup_sync(op: str, value) -> None:
    value = getattr(value, "value", value)           # a constexpr from the kernel
    check(isinstance(value, bool), lambda: expected(op, "warpgroup_sync", "True or False (a compile-time bool)",
                                                    value))


@tlx_op(aliases={"bar": "id", "arrive_count": "num_threads"})
def named_barrier_wait(v, id, num_threads):
    """`bar.sync id, num_threads`: wait until `num_threads` threads arrived at hardware barrier `id`."""
    check_int("named_barrier_wait", "id", id, lo=1, hi=15)
    check_int("named_barrier_wait", "num_threads", num_threads, lo=32, multiple=32)


@tlx_op(aliases={"bar": "id", "arrive_count": "num_threads"})
def named_barrier_arrive(v, id, num_threads):
    """`bar.arrive id, num_threads`: arrive at hardware barrier `id` without waiting."""
    check_int("named_barrier_arrive", "id", id, lo=1, hi=15)
    check_int("named_barrier_arrive", "num_threads", num_threads, lo=32, multiple=32)


@tlx_op
def fence(v, scope):
    """`"async_shared"`: fence.proxy.async.shared::cta; `"gpu"`: fence.acq_rel.gpu; `"sys"`: fence.acq_rel.sys."""
    check(scope in ("async_shared", "gpu", "sys"),
          lambda: expected("fence", "scope", "'async_shared', 'gpu' or 'sys'", repr(scope)))


@tlx_op
def fence_async_shared(v):
    """Order generic-proxy shared-memory writes before async-proxy reads (TMA store, wgmma)."""
