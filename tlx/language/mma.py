"""Tensor-core MMA (Hopper wgmma)."""
from __future__ import annotations

from ..errors import check, expected
from ._registry import check_int, check_kind, tlx_op


@tlx_op
def async_dot(v, a, b, acc=None, use_acc=None, mBarriers=(), out_dtype=None):
    """wgmma.mma_async: a [M, K] (shared memory or registers) times b [K, N] (shared memory).

    Returns the accumulator (fp32 by default); it is usable after `async_dot_wait`."""
    check_kind(v, "async_dot", "a", a, ("buffer", "tensor"))
    check_kind(v, "async_dot", "b", b, ("buffer",), "wgmma reads B from shared memory")
    sa, sb = tuple(v.shape(a)), tuple(v.shape(b))
    check(len(sa) == 2 and len(sb) == 2, lambda: expected("async_dot", "a/b", "2-D operands", (sa, sb)))
    m, k = sa
    k2, n = sb
    check(k == k2, lambda: expected("async_dot", "b", f"K = {k} rows (a is {sa})", f"shape {sb}"))
    check(m % 64 == 0, lambda: expected("async_dot", "a", "M a multiple of 64 (one warp group computes 64 rows)",
                                        f"shape {sa}"))
    check(8 <= n <= 256 and n % 8 == 0, lambda: expected("async_dot", "b", "N a multiple of 8 in [8, 256]",
                                                         f"shape {sb}"))
    check(k % 16 == 0 and k >= 16, lambda: expected("async_dot", "a", "K a multiple of 16", f"shape {sa}"))
    check(not mBarriers, lambda: expected("async_dot", "mBarriers", "empty on Hopper (use async_dot_wait)",
                                          mBarriers))
    if acc is not None:
        check_kind(v, "async_dot", "acc", acc, ("tensor",))
        check(tuple(v.shape(acc)) == (m, n), lambda: expected("async_dot", "acc", f"shape {(m, n)}",
                                                              tuple(v.shape(acc))))


@tlx_op
def async_dot_wait(v, pendings, acc):
    """wgmma.wait_group: wait until at most `pendings` async dots are outstanding; returns `acc`."""
    check_int("async_dot_wait", "pendings", pendings, lo=0)
    check_kind(v, "async_dot_wait", "acc", acc, ("tensor",))
