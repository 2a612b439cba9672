"""Simulator rules for shared-memory buffers, and the access checks every family shares.

Each slot remembers its last write and the reads since. A read must be ordered after the last
write (rule 2); a write must be ordered after the last write and every read since (rule 3), and
must not hit a slot an outstanding wgmma or TMA store still reads (rules 6 and 3).
"""
from __future__ import annotations

import numpy as np

from . import interp, warpgroup_sync
from .barriers import arrive_count_hint
from .errors import AsyncDotError, OverwriteBeforeReleaseError, ReadBeforeWaitError
from .rules import OpContext, sim_rule
from .sites import allocation_name
from .state import Access, BarrierArray, BufferRing, BufferView, SharedAlloc, SlotState



def current_epoch(ctx: OpContext):
    return ctx.task.clock.epoch(ctx.task.component)


def _tracked(buf: BufferView):
    """(the states whose last fill an access of `buf` meets, the states whose reads it meets, the state that
    records it): a view through `local_slice` is a part of its slot with its own history (parts are taken
    to be disjoint, as the halves two CTAs of a cluster fill); any other view is the whole slot, which
    meets every part. A part meets the whole slot's reads too."""
    slot, region = buf.state, buf.region
    if region is None:
        states = [slot, *slot.parts.values()]
        return states, states, slot
    part = slot.parts.get(region)
    if part is None:
        part = slot.parts[region] = SlotState(slot.last_write)
    return [part], [slot, part], part


def record_read(ctx: OpContext, buf: BufferView, what: str) -> None:
    """Rule 2: the last write to the slot (each part of it the view covers) must have landed and be visible
    to this task."""
    fills, _, own = _tracked(buf)
    for st in fills:
        w = st.last_write
        if not w.landed or not ctx.task.clock.covers(w.epoch):
            state = "is still in flight" if not w.landed else "is not ordered before this read"
            ctx.report(ReadBeforeWaitError(
                f"{what} reads {buf.label} but its last write ({w.what}) {state}", ctx.site,
                target=buf.alloc.name, slot=buf.slot, phase=w.phase, other=w.site,
                details="wait on the barrier that the write completes (its 'full' barrier, this phase) before "
                        "reading"))
            break
    own.reads[ctx.task.component] = Access(current_epoch(ctx), ctx.site, what, who=ctx.task.label)


def check_write(ctx: OpContext, buf: BufferView, what: str) -> None:
    """Rules 3 and 6: nobody may still read (or still be filling) the slot this write replaces."""
    slot, task = buf.state, ctx.task
    for rec in slot.dot_readers:
        ctx.report(AsyncDotError(f"{what} overwrites {buf.label} while an async_dot reading it is outstanding",
                                 ctx.site, target=buf.alloc.name, slot=buf.slot, other=rec.site,
                                 details="call async_dot_wait to cover that dot before refilling its operand"))
    for rec in slot.store_readers:
        ctx.report(OverwriteBeforeReleaseError(
            f"{what} overwrites {buf.label} while a TMA store still reads it", ctx.site,
            target=buf.alloc.name, slot=buf.slot, other=rec.site,
            details="call async_descriptor_store_wait before reusing the store's source buffer"))
    # The slot's guards are the waits the writer made since its previous write to any slot; a write
    # with none (A then B after one `wait(empty[s])`) shares the previous write's guards.
    fresh = task.wait_log[task.write_mark:]
    guards = set(fresh) if fresh else task.write_guards
    fills, readers, _ = _tracked(buf)
    for st in fills:                                              # the fills this write replaces
        w = st.last_write
        if not w.landed or not task.clock.covers(w.epoch):
            ctx.report(OverwriteBeforeReleaseError(
                f"{what} overwrites {buf.label} before its previous fill ({w.what}) was observed", ctx.site,
                target=buf.alloc.name, slot=buf.slot, phase=w.phase, other=w.site,
                details=_early_release_hint(guards) or
                "wait on the slot's 'empty' barrier (released by its readers) before refilling it"))
            break
    for r in (r for st in readers for r in st.reads.values()):
        if not task.clock.covers(r.epoch):
            ctx.report(OverwriteBeforeReleaseError(
                f"{what} overwrites {buf.label} while a reader may still use it (no release since its read)",
                ctx.site, target=buf.alloc.name, slot=buf.slot, other=r.site,
                details=_early_release_hint(guards) or _unreleased_reader_hint(guards, task.label, r) or
                "the reader must arrive on an 'empty' barrier that this writer waits on before the write"))
            break
    if fresh:
        task.write_guards = guards
    task.write_mark = len(task.wait_log)
    slot.guards.update(task.write_guards)


def _early_release_hint(guards) -> str:
    """When a barrier this write waited on has more arriving tasks than its arrive_count, the wait passed on
    a phase that completed early: say so instead of asking for a wait the writer did make."""
    return "\n".join(h for h in sorted(arrive_count_hint(bar) for bar in guards) if h)


def _unreleased_reader_hint(guards, writer: str, read: Access) -> str:
    """The phases this write's waits passed on, when the reader was among none of their arrivals: names the
    barrier to count the reader on (an arrive_count too low shows here before every task has arrived)."""
    observed = []
    for bar in sorted(guards, key=lambda b: b.label):
        passed = bar.state.completed.get(bar.state.seen_by[writer] - 1)
        if passed is None or not passed.arrivers:     # older than a parity wait sees, or the initialisation
            continue
        if read.who in passed.arrivers:               # it did release to this write: the race is elsewhere
            return ""
        observed.append((bar, passed.arrivers))
    return "\n".join(
        f"{writer} waited on {bar.label}, whose phase completed with arrivals from {', '.join(arrivers)} "
        f"(arrive_count {bar.state.arrive_count}); {read.who} read the buffer but was not among them. If "
        f"{read.who} releases it on {bar.label}, arrive_count must count it too; else it must arrive there "
        f"after its read" for bar, arrivers in observed)


def set_write(buf: BufferView, access: Access) -> None:
    _, _, own = _tracked(buf)
    own.last_write = access
    own.reads = {}
    if own is buf.state:                         # the whole slot: its parts' histories end here
        own.parts = {}


@sim_rule("local_alloc")
def _local_alloc(ctx: OpContext, shape, dtype, num, storage, reuse, layout):
    site = ctx.site
    name = allocation_name(site.file, site.line, "smem")
    first = Access(current_epoch(ctx), site, "allocation (poison)")
    alloc = SharedAlloc(name, tuple(shape), dtype, interp.np_dtype(dtype), num, ctx.program.options.poison, first)
    alloc.init_clock = ctx.task.clock.copy()          # what a peer CTA must have seen to reach it (cluster.py)
    ctx.program.register(alloc)
    return BufferRing(alloc)


@sim_rule("local_view")
def _local_view(ctx: OpContext, buf, index):
    assert isinstance(buf, (BufferRing, BarrierArray))
    return buf[index]


@sim_rule("local_load")
def _local_load(ctx: OpContext, buf, token, layout):
    record_read(ctx, buf, "local_load")
    warpgroup_sync.shared_access(ctx, f"local_load({buf.label})")
    return interp.make_tensor(buf.array().copy(), buf.dtype)


@sim_rule("local_store")
def _local_store(ctx: OpContext, buf, value):
    check_write(ctx, buf, "local_store")
    buf.array()[...] = np.asarray(value.handle.data).astype(buf.array().dtype)
    set_write(buf, Access(current_epoch(ctx), ctx.site, "local_store"))
    warpgroup_sync.shared_access(ctx, f"local_store({buf.label})", written=buf.alloc)


@sim_rule("local_trans")
def _local_trans(ctx: OpContext, buf, dims):
    return buf.with_transform(("trans", tuple(dims)))


@sim_rule("local_slice")
def _local_slice(ctx: OpContext, buf, offset, shape):
    return buf.with_transform(("slice", tuple(offset), tuple(shape)))


@sim_rule("local_reshape")
def _local_reshape(ctx: OpContext, buf, shape):
    return buf.with_transform(("reshape", tuple(shape)))
