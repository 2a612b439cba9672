"""Vector clocks for happens-before between tasks and async agents (TMA, cp.async).

A clock maps a component (a task, or one async copy) to a counter. An access is recorded as an
epoch `(component, counter)`; it happens before a task whose clock holds at least that counter.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Epoch:
    component: object
    counter: int


class VectorClock:
    __slots__ = ("counts",)

    def __init__(self, counts: dict | None = None):
        self.counts = dict(counts or {})

    def copy(self) -> "VectorClock":
        return VectorClock(self.counts)

    def join(self, other: "VectorClock") -> None:
        for comp, n in other.counts.items():
            if self.counts.get(comp, 0) < n:
                self.counts[comp] = n

    def tick(self, component) -> None:
        self.counts[component] = self.counts.get(component, 0) + 1

    def epoch(self, component) -> Epoch:
        return Epoch(component, self.counts.get(component, 0))

    def covers(self, epoch: Epoch) -> bool:
        """True if the access at `epoch` happens before the owner of this clock."""
        return self.counts.get(epoch.component, 0) >= epoch.counter

    def covers_clock(self, other: "VectorClock") -> bool:
        """True if everything `other` has seen happens before the owner of this clock."""
        return all(self.counts.get(comp, 0) >= n for comp, n in other.counts.items())
