"""Remember the last prepared launch (compiled kernel, expanded descriptors, grid) of a host wrapper.

Building TMA descriptors and going through Triton's launch path costs tens of microseconds per call,
which dominates small problems. The key is the full content the launch depends on (pointers, shapes,
strides, dtypes, config), so a hit is exactly the launch that would have been built. A GPU prepared
launch holds addresses, not tensors (tlx/gluon/prepared.py), so a fresh output the caching allocator
puts at the last one's address hits too. One entry per wrapper."""
from __future__ import annotations


def tensor_key(t) -> tuple:
    return (None,) if t is None else (t.data_ptr(), tuple(t.shape), t.stride(), t.dtype, t.device)


class LaunchCache:
    def __init__(self):
        self._entry = None                # (key, value), replaced whole: threads never mix two entries

    def get(self, key, build):
        entry = self._entry
        if entry is not None and entry[0] == key:
            return entry[1]
        value = build()                   # a failed build leaves the previous entry, still consistent
        self._entry = (key, value)
        return value


def holding(launch, *buffers):
    """`launch` made to keep the wrapper's own buffers alive (stream-K workspaces, tile counters) that its
    arguments point into: a GPU prepared launch holds addresses only, so a buffer nothing else references
    would be freed and reused while the cached launch still writes to it."""
    launch.buffers = buffers
    return launch
