"""Simulator rules for async copies: TMA loads/stores (descriptors) and cp.async (pointers).

A TMA load reads global memory when issued and lands later, at a step the scheduler picks: it
then writes the slot and delivers its bytes (the whole box, zero-filled out of bounds) to its
mbarrier. cp.async copies land when `async_load_wait_group` covers their group.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..errors import TlxCompileError, expected
from . import interp
from . import warpgroup_sync as warpgroup_sync_rule
from .clock import Epoch, VectorClock
from .errors import ExpectBytesError, Site
from .memory import check_write, record_read, set_write
from .rules import OpContext, sim_rule
from .scheduler import AsyncEvent
from .state import Access, BarrierRef, BufferView
from .barriers import pred_true, settle


def _same_shape(op: str, buf: BufferView, data: np.ndarray) -> None:
    if tuple(data.shape) != tuple(buf.shape):
        raise TlxCompileError(expected(op, "buf", f"shape {tuple(data.shape)} (the copied box)", buf.shape))


@sim_rule("async_descriptor_load", yields=True)
def _async_descriptor_load(ctx: OpContext, desc, buf, offsets, barrier, pred, cache_modifier, eviction_policy,
                           multicast_targets, two_ctas, warpgroup_sync):
    warpgroup_sync_rule.marked(ctx, "async_descriptor_load", buf.label, warpgroup_sync)
    if not pred_true(pred):
        return
    data = interp.descriptor_load(desc, offsets)
    _same_shape("async_descriptor_load", buf, data)
    for dest, bar in _destinations(ctx, buf, barrier, multicast_targets):
        _land_later(ctx, dest, bar, data)


def _destinations(ctx: OpContext, buf: BufferView, barrier: BarrierRef, targets) -> list:
    """(buffer, barrier) pairs the load writes: this CTA's, or with `multicast_targets` the same slot and
    barrier in each listed CTA of the cluster."""
    if not targets:
        return [(buf, barrier)]
    from .cluster import remote_barrier, remote_buffer
    ranks = [interp.to_int(t) for t in targets]
    if len(set(ranks)) != len(ranks):
        raise TlxCompileError(expected("async_descriptor_load", "multicast_targets", "distinct CTA ranks", ranks))
    out = []
    for r in ranks:
        if r == ctx.program.rank:
            out.append((buf, barrier))
        else:
            out.append((remote_buffer(ctx, buf, r, "async_descriptor_load"),
                        remote_barrier(ctx, barrier, r, "async_descriptor_load")))
    return out


def _land_later(ctx: OpContext, buf: BufferView, barrier: BarrierRef, data: np.ndarray) -> None:
    """Record the write now and let the scheduler pick when it lands and delivers its bytes."""
    check_write(ctx, buf, "async_descriptor_load")
    nbytes = int(data.size * data.itemsize)
    component = ("tma", ctx.program.next_id())
    landing_clock = ctx.task.clock.copy()
    landing_clock.tick(component)
    issue_phase = barrier.state.phase
    access = Access(Epoch(component, 1), ctx.site, "async_descriptor_load", landed=False, phase=issue_phase)
    set_write(buf, access)
    expect_site = barrier.state.expect_sites[-1] if barrier.state.expect_sites else None
    site, program = ctx.site, ctx.program

    def land():
        buf.array()[...] = data
        access.landed = True
        _deliver(program, barrier, nbytes, landing_clock, issue_phase, site, expect_site)
    program.scheduler.post(AsyncEvent(land, f"TMA load into {buf.label} (barrier {barrier.label})"))


def _deliver(program, bar: BarrierRef, nbytes: int, clock: VectorClock, issue_phase: int, site: Site,
             expect_site: Site | None) -> None:
    st = bar.state
    if st.phase != issue_phase:
        program.report(ExpectBytesError(
            f"a TMA load issued in phase {issue_phase} of {bar.label} landed after that phase completed: "
            f"barrier_expect_bytes was smaller than the bytes the phase's loads deliver", expect_site or site,
            target=bar.label, phase=issue_phase, other=site))
    st.delivered += nbytes
    st.clock.join(clock)
    settle(program, bar, site)


@dataclass
class StoreRecord:
    buf: BufferView
    site: Site


@sim_rule("async_descriptor_store", yields=True)
def _async_descriptor_store(ctx: OpContext, desc, buf, offsets, eviction_policy, store_reduce):
    record_read(ctx, buf, "async_descriptor_store")
    warpgroup_sync_rule.tma_store_issued(ctx, buf)
    data = buf.array().copy()
    _same_shape("async_descriptor_store", buf, data)
    interp.descriptor_store(desc, data, offsets)
    rec = StoreRecord(buf, ctx.site)
    buf.state.store_readers.append(rec)
    ctx.task.async_state.setdefault("tma_stores", []).append(rec)


@sim_rule("async_descriptor_store_wait", yields=True)
def _async_descriptor_store_wait(ctx: OpContext, pendings):
    stores = ctx.task.async_state.setdefault("tma_stores", [])
    while len(stores) > pendings:
        rec = stores.pop(0)
        rec.buf.state.store_readers.remove(rec)
    warpgroup_sync_rule.shared_access(ctx, "async_descriptor_store_wait")   # one thread learned it: the rest may not have


@dataclass
class CpAsyncCopy:
    buf: BufferView
    data: np.ndarray
    access: Access
    clock: VectorClock


@dataclass
class CpAsyncState:
    open: list = field(default_factory=list)       # issued, not yet committed
    groups: list = field(default_factory=list)     # committed groups, oldest first


def _cp_state(ctx: OpContext) -> CpAsyncState:
    return ctx.task.async_state.setdefault("cp_async", CpAsyncState())


@sim_rule("async_load", yields=True)
def _async_load(ctx: OpContext, ptrs, buf, mask, other, cache_modifier, eviction_policy, is_volatile, bulk,
                bulk_size, barrier):
    check_write(ctx, buf, "async_load")
    data = interp.pointer_load(ptrs, mask)
    _same_shape("async_load", buf, data)
    component = ("cp.async", ctx.program.next_id())
    access = Access(Epoch(component, 1), ctx.site, "async_load (cp.async)", landed=False)
    set_write(buf, access)
    _cp_state(ctx).open.append(CpAsyncCopy(buf, data, access, VectorClock({component: 1})))


@sim_rule("async_load_commit_group")
def _async_load_commit_group(ctx: OpContext, tokens):
    state = _cp_state(ctx)
    state.groups.append(state.open)
    state.open = []


@sim_rule("async_load_wait_group", yields=True)
def _async_load_wait_group(ctx: OpContext, pendings, tokens):
    state = _cp_state(ctx)
    while len(state.groups) > pendings:
        for copy in state.groups.pop(0):
            copy.buf.array()[...] = copy.data
            copy.access.landed = True
            ctx.task.clock.join(copy.clock)
    warpgroup_sync_rule.shared_access(ctx, "async_load_wait_group")   # each thread waits for its own copies only
