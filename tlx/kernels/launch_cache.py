"""Remember the last launch's prepared arguments (descriptors, grid, constexprs) of a host wrapper.

Building TMA descriptors costs tens of microseconds per call, which dominates small problems.
The key is the full content the arguments depend on (pointers, shapes, strides, dtypes, config),
so a hit is exactly the launch that would have been built. One entry per wrapper: it keeps the
last call's tensors alive until the next call with different tensors, never more."""
from __future__ import annotations


def tensor_key(t) -> tuple:
    return (None,) if t is None else (t.data_ptr(), tuple(t.shape), t.stride(), t.dtype, t.device)


class LaunchCache:
    def __init__(self):
        self._key = None
        self._value = None

    def get(self, key, build):
        if key != self._key:
            self._value = build()
            self._key = key
        return self._value
