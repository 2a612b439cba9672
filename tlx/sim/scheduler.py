"""Cooperative tasks: one OS thread per task, exactly one running at a time (a baton).

The driver (the launching thread) picks, with a seeded RNG, either a runnable task or a pending
async completion (a TMA load landing). A task runs until its next yield point (an op that may
block or complete async work) and hands the baton back. When no task can run and nothing is in
flight, the driver raises `DeadlockError` instead of hanging.
"""
from __future__ import annotations

import random
import threading
from dataclasses import dataclass
from typing import Callable

from .clock import VectorClock
from .errors import DeadlockError, LivelockError, ProtocolError, Site

_current = threading.local()


class TaskAborted(BaseException):
    """Unwinds a parked task when its program instance is abandoned (not an Exception on purpose)."""


def current_task() -> "Task":
    task = getattr(_current, "task", None)
    assert task is not None, "tlx.sim: a tlx op ran outside a simulated program instance"
    return task


@dataclass
class Wait:
    """A blocked task's condition and a description for deadlock reports."""
    ready: Callable[[], bool]
    describe: Callable[[], str]
    site: Site
    diagnose: Callable[[], ProtocolError | None] | None = None   # a more precise report than "deadlock"
    joins_children: bool = False    # the trunk waiting for its tasks: left out of deadlock listings


@dataclass
class AsyncEvent:
    """An in-flight async completion the driver may deliver at any step (e.g. a TMA landing)."""
    fire: Callable[[], None]
    describe: str


class Task:
    """One task (or the trunk) of a program instance, with its happens-before clock."""

    def __init__(self, program, index: int | None, replica: int, num_warps: int, clock: VectorClock):
        self.program, self.index, self.replica, self.num_warps = program, index, replica, num_warps
        self.component = ("task", index, replica, program.next_id())
        self.clock = clock
        self.clock.tick(self.component)
        self.waiting: Wait | None = None
        self.done = False
        self.error: BaseException | None = None
        self.go = threading.Semaphore(0)
        self.thread: threading.Thread | None = None
        self.async_state: dict = {}     # per-family async bookkeeping (wgmma groups, cp.async, TMA stores)
        self.wait_log: list = []        # mbarriers this task waited on, in order (they guard its next writes)
        self.write_mark = 0             # wait_log length at this task's last shared-memory write
        self.write_guards: set = set()  # the waits that guarded that write

    @property
    def label(self) -> str:
        name = "trunk" if self.index is None else f"task {self.index} replica {self.replica}"
        return name if self.program.cluster.size == 1 else f"CTA {self.program.rank} {name}"

    def release(self) -> None:
        """After publishing this clock (an arrive): later accesses get a fresh epoch."""
        self.clock.tick(self.component)


class Scheduler:
    def __init__(self, seed: int, max_switches: int):
        self.rng = random.Random(seed)
        self.max_switches = max_switches
        self.tasks: list[Task] = []
        self.events: list[AsyncEvent] = []
        self.back = threading.Semaphore(0)
        self.aborting = False
        self.switches = 0
        self.on_error: Callable[[ProtocolError], None] | None = None
        self.on_resume: Callable[[Task], None] | None = None   # a cluster: the interpreter's program id

    # -- called on task threads --------------------------------------------------------------
    def spawn(self, task: Task, fn: Callable, args: tuple) -> None:
        def body():
            _current.task = task
            task.go.acquire()
            try:
                if self.aborting:
                    raise TaskAborted
                if self.on_resume is not None:
                    self.on_resume(task)
                fn(*args)
            except TaskAborted:
                pass
            except BaseException as e:  # handed to the driver, re-raised on the launching thread
                task.error = e
            finally:
                task.done = True
                self.back.release()
        task.thread = threading.Thread(target=body, daemon=True, name=f"tlx-sim {task.label}")
        self.tasks.append(task)
        task.thread.start()

    def switch(self, task: Task) -> None:
        """Hand the baton to the driver; return when the driver picks this task again."""
        self.back.release()
        task.go.acquire()
        if self.aborting:
            raise TaskAborted
        if self.on_resume is not None:
            self.on_resume(task)

    def block_until(self, task: Task, wait: Wait) -> None:
        task.waiting = wait
        try:
            while not wait.ready():
                self.switch(task)
        finally:
            task.waiting = None

    def post(self, event: AsyncEvent) -> None:
        self.events.append(event)

    # -- the driver ------------------------------------------------------------------------------
    def run(self, deadlock_site: Callable[[list[Task]], Site]) -> None:
        try:
            while True:
                live = [t for t in self.tasks if not t.done]
                if not live:
                    return
                runnable = [t for t in live if t.waiting is None or t.waiting.ready()]
                choices = len(runnable) + len(self.events)
                if choices == 0:
                    raise self.deadlock(live, deadlock_site)
                self.switches += 1
                if self.switches > self.max_switches:
                    raise LivelockError(f"more than {self.max_switches} scheduling steps", deadlock_site(live))
                pick = self.rng.randrange(choices)
                if pick >= len(runnable):
                    self.events.pop(pick - len(runnable)).fire()
                    continue
                task = runnable[pick]
                task.go.release()
                self.back.acquire()
                if task.error is not None:
                    raise task.error
        finally:
            self.abort()

    def deadlock(self, live: list[Task], deadlock_site) -> ProtocolError:
        for t in live:
            specific = t.waiting.diagnose() if t.waiting is not None and t.waiting.diagnose else None
            if specific is not None:
                return specific
        waits = [f"{t.label} waits: {t.waiting.describe()} at {t.waiting.site.location}"
                 f"\n      {t.waiting.site.source}" for t in live
                 if t.waiting is not None and not t.waiting.joins_children]
        return DeadlockError(f"all {len(live)} live task(s) are blocked and nothing is in flight",
                             deadlock_site(live), waits)

    def abort(self) -> None:
        """Unwind every parked thread, one at a time (the baton still holds)."""
        self.aborting = True
        for task in self.tasks:
            if not task.done:
                task.go.release()
                self.back.acquire()
