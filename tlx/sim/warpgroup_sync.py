"""Rule 8: `warpgroup_sync=False` on an mbarrier op, checked at the tlx level (the compiler checks the
same on the PTX, tlx/gluon/barrier_elision.py, where layout conversions through shared memory show too).

The simulator runs a warp group as one unit, but on the GPU its four warps drift apart wherever no
barrier lines them up, and a marked op has none. Every warp is past a point once an async_dot issued
after it has retired (all four warps issue a wgmma together), after a named barrier, or after an unmarked
mbarrier op (it keeps its warp-group bar.sync). Until then:

- the task's own shared-memory access (local_load, local_store, a TMA-store or cp.async wait, a fence)
  may still be running in another warp, so a marked op there is reported at once (a TMA store of what
  the group just wrote lines it up: the compiler puts a barrier before it);
- a passed barrier_wait may still lie ahead of another warp. That is harmless until the barrier
  completes its next phase: the late warp would then wait on a parity that has flipped back and miss
  its phase. So a marked op exposes the task's lagging waits, and the barrier's next completion while
  one is exposed is reported (a stage ring is safe because a stage is released only after a dot issued
  after its wait retires, which ends the lag first).
"""
from __future__ import annotations

from dataclasses import dataclass, field

from .errors import Site, WarpgroupSyncError
from .rules import OpContext


@dataclass
class Lag:
    """An op that another warp of the task's group may still be before."""
    what: str
    site: Site
    task: str = ""
    bar: object = None          # a barrier_wait's BarrierRef; None for a shared-memory access
    written: object = None      # the allocation a local_store (and the fence after it) wrote
    phase: int = 0              # the barrier's pending phase when the wait passed
    first_dot: object = None    # the first async_dot issued after the op (a DotRecord)
    exposed_by: Site | None = None   # the marked op that let the group drift past it

    def settled(self) -> bool:
        return self.first_dot is not None and self.first_dot.done


@dataclass
class Drift:
    access: Lag | None = None                  # the task's last shared-memory access not yet settled
    waits: list[Lag] = field(default_factory=list)


def _drift(ctx: OpContext) -> Drift:
    return ctx.task.async_state.setdefault("warpgroup_sync", Drift())


def shared_access(ctx: OpContext, what: str, written=None) -> None:
    drift = _drift(ctx)
    if what == "fence_async_shared" and drift.access is not None:
        written = drift.access.written          # the fence publishes that write to the async proxy
    drift.access = Lag(what, ctx.site, ctx.task.label, written=written)


def tma_store_issued(ctx: OpContext, buf) -> None:
    """A TMA store of a buffer the group just wrote: the compiler's Membar pass puts a warp-group
    barrier before it (one thread stores what every warp wrote), which lines the group up."""
    drift = _drift(ctx)
    if drift.access is not None and drift.access.written is buf.alloc:
        in_line(ctx)


def waited(ctx: OpContext, bar) -> None:
    drift = _drift(ctx)
    # a lag whose barrier completed its next phase already can no longer fire: drop it (keeps the list short)
    _forget(drift, lambda lag: lag.bar is None or lag.bar.state.phase <= lag.phase)
    drift.waits.append(Lag(f"barrier_wait({bar.label})", ctx.site, ctx.task.label, bar=bar, phase=bar.state.phase))


def dot_issued(ctx: OpContext, record) -> None:
    drift = _drift(ctx)
    for lag in ([drift.access] if drift.access else []) + drift.waits:
        if lag.first_dot is None:
            lag.first_dot = record


def _forget(drift: Drift, keep) -> None:
    if drift.access and not keep(drift.access):
        drift.access = None
    for lag in drift.waits:
        if not keep(lag) and lag.exposed_by is not None:
            lag.bar.state.exposed_waits.remove(lag)
    drift.waits = [lag for lag in drift.waits if keep(lag)]


def dots_retired(ctx: OpContext) -> None:
    _forget(_drift(ctx), lambda lag: not lag.settled())


def in_line(ctx: OpContext) -> None:
    """A named barrier (or a compiler barrier): every warp of the group is past everything before it."""
    _forget(_drift(ctx), lambda lag: False)


def marked(ctx: OpContext, op: str, target: str, warpgroup_sync) -> None:
    """Before an mbarrier op or TMA load: unmarked, it keeps its warp-group bar.sync, which lines the group up
    (a marked op right after one is sound: CLUSTER=2's remote arrive after the local one); marked
    warpgroup_sync=False, it is checked."""
    if getattr(warpgroup_sync, "value", warpgroup_sync):
        # its bar.sync waits for every warp, so they are past everything before it, but a wait an earlier mark
        # exposed stays exposed: a late warp holds the bar.sync back, and the barrier may move on meanwhile
        _forget(_drift(ctx), lambda lag: lag.exposed_by is not None)
        return
    drift = _drift(ctx)
    if drift.access is not None:
        ctx.report(WarpgroupSyncError(
            f"{op} on {target} is marked warpgroup_sync=False, but the task ran {drift.access.what} after its last "
            "named barrier or retired async_dot: another warp of the group may still be at it", ctx.site,
            target=target, other=drift.access.site,
            details="retire an async_dot issued after that access first (async_dot_wait), or drop warpgroup_sync=False"))
    for lag in drift.waits:
        if lag.exposed_by is None:
            lag.exposed_by = ctx.site
            lag.bar.state.exposed_waits.append(lag)


def phase_completing(program, bar) -> None:
    """Before `bar` completes a phase: report an exposed wait that a late warp would now miss."""
    for lag in bar.state.exposed_waits:
        if lag.phase == bar.state.phase:
            program.report(WarpgroupSyncError(
                f"{bar.label} completes its next phase while a warp of {lag.task} may still be before "
                f"{lag.what}: the warpgroup_sync=False op at line {lag.exposed_by.line} let the group drift past it "
                "before any async_dot issued after that wait retired, and the late warp would miss its phase",
                lag.exposed_by, target=bar.label, phase=bar.state.phase, other=lag.site,
                details="retire an async_dot issued after the wait before the marked op, or drop warpgroup_sync=False"))
            return
