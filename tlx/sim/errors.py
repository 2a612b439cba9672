"""Protocol reports: one exception class per rule, each a record of where and what.

Every report carries the kernel, the program id, the task (index and replica), the op, the user's
`file:line`, the barrier or buffer (with slot index) and the phase, as attributes and in the text.
"""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Site:
    """Where an op ran: which kernel, program instance, task, and user source line."""
    kernel: str = "?"
    program_id: tuple = ()
    task: int | None = None        # partition index in its async_tasks region (None: outside a region)
    replica: int = 0
    op: str = "?"
    file: str = "?"
    line: int = 0
    source: str = ""               # the text of the user's line

    @property
    def location(self) -> str:
        return f"{self.file}:{self.line}"

    @property
    def who(self) -> str:
        task = "trunk" if self.task is None else f"task {self.task} replica {self.replica}"
        return f"program {self.program_id} {task}"

    def describe(self) -> str:
        name = self.op if self.op.startswith("tl.") else f"tlx.{self.op}"
        text = f"{name} in {self.kernel}, {self.who}, at {self.location}"
        return text + (f"\n    {self.source}" if self.source else "")


class ProtocolError(Exception):
    """A TLX protocol bug found by the simulator (base class; see the subclasses for each rule)."""
    rule = "protocol"

    def __init__(self, summary: str, site: Site, *, target: str = "", slot: int | None = None,
                 phase: int | None = None, other: Site | None = None, details: str = ""):
        self.summary, self.site, self.target, self.slot, self.phase = summary, site, target, slot, phase
        self.other, self.details = other, details
        super().__init__(self.render())

    # flat attributes, so tests and tools need not know about Site
    kernel = property(lambda self: self.site.kernel)
    program_id = property(lambda self: self.site.program_id)
    task = property(lambda self: self.site.task)
    replica = property(lambda self: self.site.replica)
    op = property(lambda self: self.site.op)
    file = property(lambda self: self.site.file)
    line = property(lambda self: self.site.line)

    def render(self) -> str:
        lines = [f"{type(self).__name__} [{self.rule}]: {self.summary}", f"  at  {self.site.describe()}"]
        if self.target:
            slot = "" if self.slot is None else f" slot {self.slot}"
            phase = "" if self.phase is None else f", phase {self.phase} (parity {self.phase & 1})"
            lines.append(f"  on  {self.target}{slot}{phase}")
        if self.other is not None:
            lines.append(f"  vs  {self.other.describe()}")
        if self.details:
            lines.append("  " + self.details.replace("\n", "\n  "))
        return "\n".join(lines)


class DeadlockError(ProtocolError):
    """Rule 1: every live task of a program is blocked; `waits` lists each task's pending wait."""
    rule = "deadlock"

    def __init__(self, summary: str, site: Site, waits: list[str], **kw):
        self.waits = waits
        super().__init__(summary, site, details="\n".join(waits), **kw)


class RaceError(ProtocolError):
    """A shared-memory access not ordered by barriers (happens-before) against a conflicting one."""
    rule = "race"


class ReadBeforeWaitError(RaceError):
    """Rule 2: a buffer slot read before the wait that makes its last write visible."""
    rule = "read-before-wait"


class OverwriteBeforeReleaseError(RaceError):
    """Rule 3: a slot written while its previous contents may still be read or are still landing."""
    rule = "overwrite-before-release"


class BarrierProtocolError(ProtocolError):
    """Misuse of an mbarrier's phase accounting."""
    rule = "barrier"


class ClusterProtocolError(BarrierProtocolError):
    """A cluster op reaching another CTA's shared memory when that is not safe: before the peer's
    allocation is ordered before it (no cluster_barrier after the barriers' initialization), or after
    the peer exited (no cluster_barrier before the end)."""
    rule = "cluster"


class ExpectBytesError(BarrierProtocolError):
    """Rule 4: barrier_expect_bytes differs from the bytes TMA loads delivered in that phase."""
    rule = "expect-bytes"


class ExtraArrivalError(BarrierProtocolError):
    """Rule 5: more arrivals in a phase than the barrier's arrive_count."""
    rule = "extra-arrival"


class MissedPhaseError(BarrierProtocolError):
    """Rule 5b: a blocked wait whose barrier completed two (or any even number of) phases since the
    waiting task last saw it, so the parity it waits for came back and the wait never returns: more
    arrivals per round than `arrive_count` (a parity wait sees only the latest phase, as on the GPU)."""
    rule = "missed-phase"


class AsyncDotError(ProtocolError):
    """Rule 6: an async_dot result used before async_dot_wait, or its operand released/overwritten early."""
    rule = "async-dot"


class WarpgroupSyncError(BarrierProtocolError):
    """Rule 8: an mbarrier op marked warpgroup_sync=False where the warp group must be in line: since
    its last barrier or retired async_dot the task waited on an mbarrier or touched shared memory
    itself, and on the GPU another warp of the group may still be before that."""
    rule = "warpgroup-sync"


class IndexOutOfRangeError(ProtocolError, IndexError):
    """Rule 7: an index outside a buffer ring or a barrier array."""
    rule = "index"


class GlobalBoundsError(ProtocolError, IndexError):
    """A tl.load, tl.store or atomic whose address (in an unmasked lane) lies in no tensor argument of the
    launch: on the GPU a fault or silent corruption of other memory, on the CPU a crash."""
    rule = "global-bounds"


class LivelockError(ProtocolError):
    """The run exceeded `SimOptions.max_switches` scheduling steps (e.g. a spin loop that never ends)."""
    rule = "livelock"


ALL_RULES = (DeadlockError, ReadBeforeWaitError, OverwriteBeforeReleaseError, ExpectBytesError,
             ExtraArrivalError, MissedPhaseError, AsyncDotError, IndexOutOfRangeError, WarpgroupSyncError,
             ClusterProtocolError)


@dataclass
class SimReport:
    """What a simulated launch found: the protocol errors (empty when clean) and how it ran."""
    kernel: str
    schedules: int
    programs: int
    errors: list[ProtocolError] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.errors

    def render(self) -> str:
        """One entry per distinct bug (rule, line, conflicting line): the first report in full, then how
        many more reports (other slots, phases, schedules) it stands for."""
        head = (f"{self.kernel}: {self.programs} program(s) x {self.schedules} schedule(s): "
                + ("ok" if self.ok else f"{len(self.errors)} protocol error(s)"))
        groups: dict[tuple, list] = {}
        for e in self.errors:
            other = getattr(e, "other", None)
            key = (type(e).__name__, e.site.location, other.location if other is not None else None)
            groups.setdefault(key, []).append(e)
        lines = [head]
        for errors in groups.values():
            more = f"\n  (+{len(errors) - 1} more report(s) of this bug: other slots, phases or schedules)" \
                if len(errors) > 1 else ""
            lines.append(str(errors[0]) + more)
        return "\n".join(lines)
