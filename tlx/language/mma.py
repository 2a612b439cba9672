"""Tensor-core MMA (Hopper wgmma)."""
from __future__ import annotations

from ..errors import check, expected
from ._registry import check_int, check_kind, tlx_op


@tlx_op(aliases={"A": "a", "B": "b"})
def async_dot(v, a, b, acc=None, use_acc=None, pred=None, mBarriers=(), two_ctas=False, force_async=False,
              input_precision=None, out_dtype=None):
    """wgmma.mma_async: a [M, K] (shared memory or registers) times b [K, N] (shared memory).

    Returns the accumulator (fp32 by default); it is usable after `async_dot_wait`. The parameters follow
    Meta TLX's order; `pred`, `two_ctas` and `force_async` have no Hopper lowering here and must keep their
    defaults, and `input_precision` may be None or "tf32" (what wgmma does with fp32 operands)."""
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
    check(pred is None, lambda: expected("async_dot", "pred", "None (a predicated wgmma is not lowered)", pred))
    check(two_ctas in (False, None), lambda: expected("async_dot", "two_ctas", "False (two-CTA MMA is Blackwell's)",
                                                      two_ctas))
    check(force_async in (False, None), lambda: expected("async_dot", "force_async", "False (every async_dot is "
                                                         "asynchronous here)", force_async))
    check(input_precision in (None, "tf32"), lambda: expected("async_dot", "input_precision", 'None or "tf32"',
                                                              repr(input_precision)))
    if acc is not None:
        check_kind(v, "async_dot", "acc", acc, ("tensor",))
        check(tuple(v.shape(acc)) == (m, n), lambda: expected("async_dot", "acc", f"shape {(m, n)}",
                                                              tuple(v.shape(acc))))


@tlx_op(aliases={"inp": "acc"})
def async_dot_wait(v, pendings, acc):
    """wgmma.wait_group: wait until at most `pendings` async dots are outstanding; returns `acc`."""
    check_int("async_dot_wait", "pendings", pendings, lo=0)
    check_kind(v, "async_dot_wait", "acc", acc, ("tensor",))
