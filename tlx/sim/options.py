"""Simulator options: one frozen, keyword-only, hashable dataclass."""
from __future__ import annotations

from dataclasses import asdict, dataclass


@dataclass(frozen=True, kw_only=True)
class SimOptions:
    """How `tlx.sim.launch` runs a kernel.

    seed:         seed of the first schedule; schedule i uses seed + i (same seed, same interleaving).
    schedules:    how many seeded interleavings to explore (task order and async completion order).
    collect_all:  keep running after a protocol error and return every report in a `SimReport`
                  (fatal ones, deadlock and index errors, still end their program instance).
    poison:       fill new shared memory with NaN (floats) / 0xFF bytes (ints).
    max_switches: scheduling steps per program instance before a `LivelockError` (never hang).
    """
    seed: int = 0
    schedules: int = 1
    collect_all: bool = False
    poison: bool = True
    max_switches: int = 2_000_000

    def __post_init__(self):
        if not (isinstance(self.seed, int) and self.seed >= 0):
            raise ValueError(f"SimOptions: 'seed' must be an int >= 0, got {self.seed!r}")
        if not (isinstance(self.schedules, int) and self.schedules >= 1):
            raise ValueError(f"SimOptions: 'schedules' must be an int >= 1, got {self.schedules!r}")
        if not (isinstance(self.max_switches, int) and self.max_switches >= 1):
            raise ValueError(f"SimOptions: 'max_switches' must be an int >= 1, got {self.max_switches!r}")

    def key(self) -> tuple:
        return tuple(sorted(asdict(self).items()))
