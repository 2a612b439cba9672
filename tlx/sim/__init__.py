"""tlx.sim: the CPU simulator backend. Runs TLX kernels with numpy, one cooperative task per
warp-specialized partition, and reports protocol bugs (races, deadlocks, barrier misuse) as data.

    kernel[grid](*args, backend="sim")           # or TLX_BACKEND=sim
    kernel[grid](*args, backend="sim", ctas_per_cga=(2, 1, 1))   # clusters of two CTAs, interleaved
    tlx.sim.launch(kernel, grid, bound_args, num_warps, SimOptions(schedules=8))
    tlx.sim.check_file("my_kernels.py")          # runs the file's TLX_CHECKS
"""
from .check import FileCheckReport, check_file
from .errors import (ALL_RULES, AsyncDotError, BarrierProtocolError, ClusterProtocolError, DeadlockError,
                     ExpectBytesError,
                     ExtraArrivalError, GlobalBoundsError, IndexOutOfRangeError, LivelockError, MissedPhaseError,
                     OverwriteBeforeReleaseError, ProtocolError, RaceError, ReadBeforeWaitError, SimReport, Site,
                     WarpgroupSyncError)
from .executor import launch
from .options import SimOptions
from .rules import RULES, missing_rules

__all__ = ["launch", "SimOptions", "SimReport", "Site", "check_file", "FileCheckReport", "RULES", "missing_rules",
           "ProtocolError", "DeadlockError", "RaceError", "ReadBeforeWaitError", "OverwriteBeforeReleaseError",
           "BarrierProtocolError", "ExpectBytesError", "ExtraArrivalError", "MissedPhaseError", "AsyncDotError",
           "IndexOutOfRangeError", "GlobalBoundsError", "LivelockError", "WarpgroupSyncError", "ClusterProtocolError",
           "ALL_RULES"]
