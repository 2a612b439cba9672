"""Async copies: TMA (tensor descriptors) and cp.async (pointers)."""
from __future__ import annotations

from ..errors import check, expected
from ._registry import check_barrier, check_buffer, check_int, check_kind, tlx_op
from .barriers import check_warpgroup_sync


@tlx_op
def async_descriptor_load(v, desc, buf, offsets, barrier, pred=None, cache_modifier="", eviction_policy="",
                          multicast_targets=None, warpgroup_sync=True):
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
    check_warpgroup_sync("async_descriptor_load", warpgroup_sync)


@tlx_op
def async_descriptor_store(v, desc, buf, offsets):
    """TMA tile store shared -> global."""
    check_kind(v, "async_descriptor_store", "desc", desc, ("descriptor",))
    check_buffer(v, "async_descriptor_store", "buf", buf)


@tlx_op
def async_descriptor_store_wait(v, pendings):
    """Wait until at most `pendings` TMA stores are outstanding (their smem source may be reused)."""
    check_int("async_descriptor_store_wait", "pendings", pendings, lo=0)


@tlx_op
def async_load(v, ptrs, buf, mask=None, other=None):
    """cp.async: copy the elements at `ptrs` into `buf` asynchronously (commit + wait groups)."""
    check_kind(v, "async_load", "ptrs", ptrs, ("tensor",))
    check_buffer(v, "async_load", "buf", buf)
    check(other is None, lambda: expected("async_load", "other", "None (masked lanes are zero-filled)", other))


@tlx_op
def async_load_commit_group(v):
    """Close the current group of cp.async copies."""


@tlx_op
def async_load_wait_group(v, pendings):
    """Wait until at most `pendings` cp.async groups are outstanding."""
    check_int("async_load_wait_group", "pendings", pendings, lo=0)
