"""Async copies: TMA (tensor descriptors) and cp.async (pointers)."""
from __future__ import annotations

from ..errors import check, expected
from ._registry import check_barrier, check_buffer, check_int, check_kind, tlx_op
from .barriers import check_warpgroup_sync


@tlx_op(aliases={"result": "buf"})
def async_descriptor_load(v, desc, buf, offsets, barrier, pred=None, cache_modifier="", eviction_policy="",
                          multicast_targets=None, two_ctas=False, warpgroup_sync=True):
    """TMA tile load global -> shared; the bytes count as transaction bytes on `barrier`.
    `warpgroup_sync=False` (tlx's own): no barrier of the running warps right before the load, where one
    kept earlier already ordered the slot's readers before it and only mbarrier arrives and TMA loads
    come between (a one-partition pipeline's refill: expect, then one load per operand). The compiler
    checks that on the PTX (tlx/gluon/barrier_elision.py)."""
    check_kind(v, "async_descriptor_load", "desc", desc, ("descriptor",))
    check_buffer(v, "async_descriptor_load", "buf", buf)
    check_barrier(v, "async_descriptor_load", "barrier", barrier)
    check(multicast_targets is None or isinstance(multicast_targets, (list, tuple)), lambda: expected(
        "async_descriptor_load", "multicast_targets", "None or a list of CTA ranks in the cluster", multicast_targets))
    for rank in multicast_targets or ():
        check_kind(v, "async_descriptor_load", "multicast_targets", rank, ("scalar",))
    check(len(offsets) == len(v.shape(buf)), lambda: expected(
        "async_descriptor_load", "offsets", f"{len(v.shape(buf))} coordinates", len(offsets)))
    check(two_ctas in (False, None), lambda: expected("async_descriptor_load", "two_ctas",
                                                      "False (two-CTA loads are Blackwell's)", two_ctas))
    check_warpgroup_sync("async_descriptor_load", warpgroup_sync)


@tlx_op(aliases={"source": "buf"})
def async_descriptor_store(v, desc, buf, offsets, eviction_policy="", store_reduce=""):
    """TMA tile store shared -> global. `eviction_policy` and `store_reduce` (Meta TLX's reducing stores)
    have no lowering on triton 3.6's Gluon and must stay ""."""
    check_kind(v, "async_descriptor_store", "desc", desc, ("descriptor",))
    check_buffer(v, "async_descriptor_store", "buf", buf)
    check(eviction_policy == "", lambda: expected("async_descriptor_store", "eviction_policy",
                                                  '"" (Gluon 3.6 has no TMA store eviction hint)', repr(eviction_policy)))
    check(store_reduce == "", lambda: expected("async_descriptor_store", "store_reduce",
                                               '"" (Gluon 3.6 has no TMA reduce store)', repr(store_reduce)))


@tlx_op
def async_descriptor_store_wait(v, pendings):
    """Wait until at most `pendings` TMA stores are outstanding (their smem source may be reused)."""
    check_int("async_descriptor_store_wait", "pendings", pendings, lo=0)


@tlx_op(aliases={"src": "ptrs", "result": "buf"})
def async_load(v, ptrs, buf, mask=None, other=None, cache_modifier="", eviction_policy="", is_volatile=False,
               bulk=False, bulk_size=None, barrier=None):
    """cp.async: copy the elements at `ptrs` into `buf` asynchronously (commit + wait groups). Masked lanes
    are zero-filled. Returns a placeholder where Meta TLX returns a token (None on the simulator, an empty
    tuple with no IR in the Gluon backend): tokens order nothing here (the commit and wait groups do), and
    every op that takes one accepts the placeholder."""
    check_kind(v, "async_load", "ptrs", ptrs, ("tensor",))
    check_buffer(v, "async_load", "buf", buf)
    check(other is None or (isinstance(other, (int, float)) and other == 0),
          lambda: expected("async_load", "other", "None or 0 (masked lanes are zero-filled)", other))
    check(not bulk and bulk_size is None and barrier is None, lambda: expected(
        "async_load", "bulk/bulk_size/barrier", "unset (bulk copies are not lowered; use a TMA descriptor)",
        (bulk, bulk_size, barrier)))


@tlx_op
def async_load_commit_group(v, tokens=()):
    """Close the current group of cp.async copies. `tokens` is accepted for Meta TLX's form and unused."""


@tlx_op
def async_load_wait_group(v, pendings, tokens=()):
    """Wait until at most `pendings` cp.async groups are outstanding. `tokens`: see async_load_commit_group."""
    check_int("async_load_wait_group", "pendings", pendings, lo=0)
