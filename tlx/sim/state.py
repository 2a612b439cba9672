"""Hardware state of one program instance (CTA): shared-memory buffers, mbarriers, named barriers.

Buffers are tracked per ring slot: the last write (with its happens-before epoch, possibly still
landing), the reads since, and the async readers still in flight (wgmma groups, TMA stores).
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass, field

import numpy as np

from .clock import Epoch, VectorClock
from .errors import IndexOutOfRangeError, ProtocolError, Site
from .scheduler import Scheduler, Task
from .sites import user_location


class ClusterState:
    """The CTAs of one cluster (`ctas_per_cga`; a lone CTA is a cluster of one). Their tasks share one
    scheduler and one id counter, so vector clocks compare across CTAs (multicast writes, remote
    arrivals); `barrier` is the cluster barrier."""

    def __init__(self, dims: tuple, seed: int, max_switches: int):
        self.dims = dims
        self.size = dims[0] * dims[1] * dims[2]
        self.programs: list[ProgramState] = []          # by rank
        self.scheduler = Scheduler(seed, max_switches)
        self.ids = itertools.count()
        self.barrier = NamedBarrierState()           # `arrivers` holds the arrived tasks of the open round


class ProgramState:
    """Everything one program instance owns; rules reach it through `task.program`."""

    def __init__(self, kernel: str, pid: tuple, options, seed: int, errors: list,
                 cluster: ClusterState | None = None):
        self.kernel, self.pid, self.options, self.errors = kernel, pid, options, errors
        self.cluster = cluster or ClusterState((1, 1, 1), seed, options.max_switches)
        self.rank = len(self.cluster.programs)
        self.cluster.programs.append(self)
        self.scheduler = self.cluster.scheduler
        self.named_barriers: dict[int, NamedBarrierState] = {}
        self.allocations: list = []   # shared allocations in program order: a peer CTA's twin has the same index
        self.trunk: Task | None = None
        self.region: list | None = None   # the tasks of the running async_tasks region (they hold the CTA's warps)
        self.cycles = 0

    def next_id(self) -> int:
        return next(self.cluster.ids)

    def register(self, allocation) -> None:
        """Number a shared allocation (buffers or barriers) by its order in this program."""
        allocation.owner, allocation.seq = self, len(self.allocations)
        self.allocations.append(allocation)

    @property
    def exited(self) -> bool:
        return self.trunk is not None and self.trunk.done

    def thread_groups(self) -> list:
        """The tasks that hold this CTA's threads now: the region's tasks (finished ones too: their warps
        wait at the region's end), else the trunk until the kernel returns."""
        if self.region is not None:
            return self.region
        return [] if self.trunk is None or self.trunk.done else [self.trunk]

    def site(self, task: Task | None, op: str) -> Site:
        file, line, text = user_location()
        index, replica = (task.index, task.replica) if task is not None else (None, 0)
        return Site(self.kernel, self.pid, index, replica, op, file, line, text)

    def report(self, error: ProtocolError) -> None:
        """Raise the first protocol error, or keep it and continue when collecting all."""
        if not self.options.collect_all:
            raise error
        self.errors.append(error)


# -- shared-memory buffers ---------------------------------------------------------------------

@dataclass
class Access:
    epoch: Epoch
    site: Site
    what: str                      # "tma load", "local_store", "local_load", ...
    landed: bool = True            # False while an async write (TMA, cp.async) is in flight
    phase: int | None = None       # the barrier phase a TMA load completes
    who: str = ""                  # the reading task's label (a read's record; for the overwrite hints)


@dataclass
class SlotState:
    last_write: Access
    reads: dict = field(default_factory=dict)          # task component -> its latest read since the write
    dot_readers: list = field(default_factory=list)     # outstanding async_dot records reading this slot
    store_readers: list = field(default_factory=list)   # outstanding TMA stores reading this slot
    guards: set = field(default_factory=set)            # barriers its writers waited on ("empty" barriers)
    parts: dict = field(default_factory=dict)           # (offset, shape) of a local_slice -> that part's SlotState


class SharedAlloc:
    """The storage of one `local_alloc`: `num` slots of `shape`, poisoned when new."""

    def __init__(self, name: str, shape: tuple, dtype, np_dtype, num: int, poison: bool, first_write: Access):
        self.name, self.shape, self.dtype, self.num = name, tuple(shape), dtype, num
        self.storage = np.empty((num, *shape), dtype=np_dtype)
        if poison:
            if np.issubdtype(np_dtype, np.floating):
                self.storage.fill(np.nan)
            else:
                self.storage.view(np.uint8).fill(0xFF)
        else:
            self.storage.fill(0)
        self.slots = [SlotState(first_write) for _ in range(num)]


class BufferRing:
    """What `local_alloc` returns: index it (`bufs[i]`) for one slot."""

    def __init__(self, alloc: SharedAlloc):
        self.alloc = alloc

    def __getitem__(self, index) -> "BufferView":
        return BufferView(self.alloc, checked_index(index, self.alloc.num, self.alloc.name, "local_view"), ())

    def __repr__(self) -> str:
        return f"<smem {self.alloc.name} x{self.alloc.num} {self.alloc.shape} {self.alloc.dtype}>"


@dataclass(frozen=True)
class BufferView:
    """One slot, possibly through views (trans/slice/reshape) that alias the slot's storage."""
    alloc: SharedAlloc
    slot: int
    transforms: tuple              # ("trans", dims) | ("slice", offset, shape) | ("reshape", shape)

    def array(self) -> np.ndarray:
        a = self.alloc.storage[self.slot]
        for t in self.transforms:
            if t[0] == "trans":
                a = a.transpose(t[1])
            elif t[0] == "slice":
                a = a[tuple(slice(o, o + s) for o, s in zip(t[1], t[2]))]
            else:
                b = a.reshape(t[1])
                assert np.shares_memory(a, b), "local_reshape of a non-contiguous view would copy"
                a = b
        return a

    def with_transform(self, t: tuple) -> "BufferView":
        return BufferView(self.alloc, self.slot, self.transforms + (t,))

    @property
    def shape(self) -> tuple:
        return tuple(self.array().shape)

    @property
    def dtype(self):
        return self.alloc.dtype

    @property
    def state(self) -> SlotState:
        return self.alloc.slots[self.slot]

    @property
    def region(self) -> tuple | None:
        """The part of the slot a `local_slice` view covers, (offset, shape); None: the whole slot."""
        t = self.transforms[0] if self.transforms else None
        return (t[1], t[2]) if t is not None and t[0] == "slice" else None

    @property
    def label(self) -> str:
        return f"{self.alloc.name}[{self.slot}]"

    def __repr__(self) -> str:
        return f"<smem {self.label} {self.shape} {self.dtype}>"


def checked_index(index, size: int, name: str, op: str) -> int:
    from .interp import to_int
    from .scheduler import current_task
    i = to_int(index)
    if not 0 <= i < size:
        task = current_task()
        raise IndexOutOfRangeError(f"index {i} is outside {name} (size {size})", task.program.site(task, op),
                                   target=name, slot=i)
    return i


# -- mbarriers -----------------------------------------------------------------------------------

@dataclass(frozen=True)
class CompletedPhase:
    clock: VectorClock       # what a wait that passes on this phase joins
    arrivers: list           # the tasks whose arrivals completed it (none for the initialisation, phase -1)


class MBarrierState:
    """One mbarrier, counted in whole phases: `phase` phases have completed so far.

    A wait for parity p passes while the current phase's parity differs from p, so a fresh barrier
    (phase 0) has parity 1 "complete". The phase completes when `arrive_count` arrivals are in and
    the delivered TMA bytes equal the expected ones."""

    def __init__(self, arrive_count: int, init_clock: VectorClock):
        self.arrive_count = arrive_count
        self.phase = 0
        # the last two completed phases (a parity wait sees no further back); -1: the barrier's initialisation
        self.completed: dict[int, CompletedPhase] = {-1: CompletedPhase(init_clock, [])}
        self.exposed_waits: list = []   # passed waits a late warp may still be before (warpgroup_sync.py)
        self.seen_by: dict[str, int] = {}   # task label -> the phase count when its last wait passed
        self.ever_arrived: set[str] = set()   # every task that arrived on it (for the arrive_count hint)
        self.new_phase()

    def new_phase(self) -> None:
        self.arrivals = 0
        self.arrivers: list[str] = []
        self.expected = 0
        self.delivered = 0
        self.expect_sites: list[Site] = []
        self.clock = VectorClock()

    def parity_done(self, parity: int) -> bool:
        return (self.phase & 1) != (parity & 1)

    def clock_seen_by(self, parity: int) -> VectorClock:
        """The clock of the completed phase a passing wait on `parity` observes."""
        return self.completed[self.phase - 1].clock

    def ready_to_complete(self) -> bool:
        return self.arrivals == self.arrive_count and self.delivered == self.expected

    def complete(self) -> None:
        self.completed[self.phase] = CompletedPhase(self.clock, self.arrivers)
        self.completed.pop(self.phase - 2, None)
        self.phase += 1
        self.new_phase()

    def describe(self) -> str:
        return (f"phase {self.phase} (parity {self.phase & 1}) pending, arrivals {self.arrivals}/"
                f"{self.arrive_count} {self.arrivers}, tx bytes {self.delivered}/{self.expected}")


class BarrierArray:
    """What `alloc_barriers` returns: index it (`bars[i]`) for one barrier."""

    def __init__(self, name: str, states: list[MBarrierState], init_clock: VectorClock | None = None):
        self.name, self.states = name, states
        self.init_clock = init_clock or VectorClock()

    def __getitem__(self, index) -> "BarrierRef":
        return BarrierRef(self, checked_index(index, len(self.states), self.name, "local_view"))

    def __repr__(self) -> str:
        return f"<mbarriers {self.name} x{len(self.states)}>"


@dataclass(frozen=True)
class BarrierRef:
    array: BarrierArray
    index: int

    @property
    def state(self) -> MBarrierState:
        return self.array.states[self.index]

    @property
    def label(self) -> str:
        return f"{self.array.name}[{self.index}]"

    def __repr__(self) -> str:
        return f"<mbarrier {self.label}>"


@dataclass
class NamedBarrierState:
    """A hardware named barrier (`bar.sync id, n`): releases when `n` threads have arrived."""
    num_threads: int = 0
    arrived: int = 0
    generation: int = 0
    arrivers: list = field(default_factory=list)
    clock: VectorClock = field(default_factory=VectorClock)
    last_clock: VectorClock = field(default_factory=VectorClock)
