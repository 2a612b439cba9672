"""Simulator rules for mbarriers, named barriers and fences.

Arrivals publish the arriving task's vector clock into the barrier's current phase; a wait that
passes joins the clock of the phase it observed (happens-before for the race checks).
"""
from __future__ import annotations

from . import warpgroup_sync as warpgroup_sync_rule
from .clock import VectorClock
from .errors import BarrierProtocolError, ExpectBytesError, ExtraArrivalError, MissedPhaseError, Site
from .interp import to_int
from .rules import OpContext, sim_rule
from .scheduler import Wait
from .sites import allocation_name
from .state import BarrierArray, BarrierRef, MBarrierState, NamedBarrierState, ProgramState


def pred_true(pred) -> bool:
    return True if pred is None else bool(to_int(pred))


def settle(program: ProgramState, bar: BarrierRef, site: Site) -> None:
    """Complete the barrier's phase if it is done; report bytes beyond what was expected (rule 4)."""
    st = bar.state
    if st.arrivals == st.arrive_count and st.delivered > st.expected:
        where = st.expect_sites[-1] if st.expect_sites else site
        program.report(ExpectBytesError(
            f"TMA loads delivered {st.delivered} bytes to {bar.label} but barrier_expect_bytes expected "
            f"{st.expected} in this phase", where, target=bar.label, phase=st.phase, other=site))
        warpgroup_sync_rule.phase_completing(program, bar)
        st.complete()   # only reached when collecting all reports
    elif st.ready_to_complete():
        warpgroup_sync_rule.phase_completing(program, bar)
        st.complete()


def arrive(ctx: OpContext, bar: BarrierRef, count: int) -> None:
    """One arriving unit (this task) adds `count` arrivals to the current phase (rule 5)."""
    st, who = bar.state, ctx.task.label
    if st.arrivals + count > st.arrive_count or (who in st.arrivers and st.arrive_count > 1):
        ctx.report(ExtraArrivalError(
            f"{who} arrives on {bar.label} ({count}) but the phase already has {st.arrivals} of "
            f"{st.arrive_count} arrivals from {st.arrivers}", ctx.site, target=bar.label, phase=st.phase,
            details="each arriving task (warp group) arrives once per phase; arrive_count = number of arriving "
                    "tasks"))
    st.arrivals += count
    st.arrivers.append(who)
    st.ever_arrived.add(who)
    st.clock.join(ctx.task.clock)
    ctx.task.release()
    settle(ctx.program, bar, ctx.site)


def arrive_count_hint(bar: BarrierRef) -> str:
    """Why a phase may complete early: more distinct tasks arrive on the barrier than `arrive_count`
    (an arrival too many per round is only seen through the race or missed phase it causes)."""
    st = bar.state
    if len(st.ever_arrived) <= st.arrive_count:
        return ""
    return (f"{bar.label} has arrive_count {st.arrive_count} but {len(st.ever_arrived)} tasks arrive on it "
            f"({', '.join(sorted(st.ever_arrived))}); if each arrives once per round, a phase completes before "
            f"all of them released it. arrive_count must count every arriving task, remote arrivals from the "
            f"other CTAs of a cluster included")


def _missed_phase(bar: BarrierRef, who: str, seen: int, parity: int, site: Site):
    """At a deadlock: the barrier completed phases this blocked wait never saw (rule 5b)."""
    st = bar.state
    if st.phase <= seen:
        return None
    hint = arrive_count_hint(bar)
    return MissedPhaseError(
        f"{who} waits on {bar.label} for parity {parity}, but the barrier completed {st.phase - seen} phases "
        f"(phase {seen} to {st.phase}) since this task last saw it; a parity wait sees only the latest phase, "
        f"so the one it waits for is hidden and the wait never returns", site, target=bar.label,
        phase=st.phase, details=hint or "more arrivals per round than arrive_count, or a task that waits on "
                                        "only some of the barrier's phases")


@sim_rule("alloc_barriers")
def _alloc_barriers(ctx: OpContext, num_barriers, arrive_count):
    name = allocation_name(ctx.site.file, ctx.site.line, "barriers")
    init = ctx.task.clock.copy()
    ctx.task.release()
    bars = BarrierArray(name, [MBarrierState(arrive_count, init) for _ in range(num_barriers)], init)
    ctx.program.register(bars)
    return bars


@sim_rule("barrier_expect_bytes", yields=True)
def _barrier_expect_bytes(ctx: OpContext, bar, nbytes, pred):
    if not pred_true(pred):
        return
    bar.state.expected += nbytes
    bar.state.expect_sites.append(ctx.site)
    arrive(ctx, bar, 1)


@sim_rule("barrier_arrive", yields=True)
def _barrier_arrive(ctx: OpContext, bar, arrive_count, remote_cta_rank, pred, warpgroup_sync):
    from .cluster import remote_barrier
    from .mma import check_release
    if not pred_true(pred):
        return
    check_release(ctx, bar)
    warpgroup_sync_rule.marked(ctx, "barrier_arrive", bar.label, warpgroup_sync)
    if remote_cta_rank is not None:                  # the same barrier in CTA `remote_cta_rank` of the cluster
        bar = remote_barrier(ctx, bar, remote_cta_rank, "barrier_arrive")
    arrive(ctx, bar, arrive_count)


def _starved_expect(bar: BarrierRef, site: Site):
    """At a deadlock: a phase with every arrival in but fewer TMA bytes than expected (rule 4)."""
    st = bar.state
    if st.arrivals == st.arrive_count and st.delivered < st.expected:
        where = st.expect_sites[-1] if st.expect_sites else site
        return ExpectBytesError(
            f"barrier_expect_bytes expected {st.expected} bytes on {bar.label} but the TMA loads of this phase "
            f"delivered only {st.delivered}; the phase can never complete", where, target=bar.label,
            phase=st.phase, other=site)
    return None


@sim_rule("barrier_wait", yields=True)
def _barrier_wait(ctx: OpContext, bar, phase, pred, warpgroup_sync):
    # The simulator runs a warp group as one unit; a warpgroup_sync=False mark is checked (rule 8), not obeyed.
    if not pred_true(pred):
        return
    warpgroup_sync_rule.marked(ctx, "barrier_wait", bar.label, warpgroup_sync)
    parity, st, site, who = to_int(phase) & 1, bar.state, ctx.site, ctx.task.label
    seen = st.seen_by.get(who, st.phase)
    ctx.program.scheduler.block_until(ctx.task, Wait(
        ready=lambda: st.parity_done(parity),
        describe=lambda: f"barrier_wait({bar.label}, parity {parity}); barrier: {st.describe()}",
        site=site, diagnose=lambda: _starved_expect(bar, site) or _missed_phase(bar, who, seen, parity, site)))
    st.seen_by[who] = st.phase
    ctx.task.clock.join(st.clock_seen_by(parity))
    ctx.task.wait_log.append(bar)
    warpgroup_sync_rule.waited(ctx, bar)


def _named(ctx: OpContext, id: int, num_threads: int) -> NamedBarrierState:
    st = ctx.program.named_barriers.setdefault(id, NamedBarrierState())
    if st.arrived and st.num_threads != num_threads:
        ctx.report(BarrierProtocolError(
            f"named barrier {id} used with num_threads={num_threads} while a round with {st.num_threads} is open",
            ctx.site, target=f"named barrier {id}"))
    threads = ctx.task.num_warps * 32
    if st.arrived + threads > num_threads:
        ctx.report(ExtraArrivalError(
            f"{ctx.task.label} brings {threads} threads to named barrier {id}: {st.arrived} already arrived of "
            f"{num_threads}", ctx.site, target=f"named barrier {id}"))
    st.num_threads = num_threads
    st.arrived += threads
    st.arrivers.append(ctx.task.label)
    st.clock.join(ctx.task.clock)
    ctx.task.release()
    if st.arrived >= num_threads:
        st.generation += 1
        st.last_clock, st.clock = st.clock, VectorClock()
        st.arrived, st.arrivers = 0, []
    return st


@sim_rule("named_barrier_wait", yields=True)
def _named_barrier_wait(ctx: OpContext, id, num_threads):
    generation = ctx.program.named_barriers.get(id, NamedBarrierState()).generation
    st = _named(ctx, id, num_threads)
    ctx.program.scheduler.block_until(ctx.task, Wait(
        ready=lambda: st.generation != generation,
        describe=lambda: f"named_barrier_wait({id}, {num_threads}); arrived {st.arrived} threads from {st.arrivers}",
        site=ctx.site))
    ctx.task.clock.join(st.last_clock)
    warpgroup_sync_rule.in_line(ctx)


@sim_rule("named_barrier_arrive", yields=True)
def _named_barrier_arrive(ctx: OpContext, id, num_threads):
    _named(ctx, id, num_threads)


@sim_rule("fence")
def _fence(ctx: OpContext, scope):
    # Recorded only: the simulator's memory is sequentially consistent, so fences move no data.
    ctx.task.async_state.setdefault("fences", []).append((scope, ctx.site.line))


@sim_rule("fence_async_shared")
def _fence_async_shared(ctx: OpContext):
    ctx.task.async_state.setdefault("fences", []).append(("async_shared", ctx.site.line))
    warpgroup_sync_rule.shared_access(ctx, "fence_async_shared")
