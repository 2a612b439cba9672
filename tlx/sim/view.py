"""The simulator's `ValueView`: what the op declarations may ask about a runtime value."""
from __future__ import annotations

import triton.language as tl

from .interp import is_descriptor, is_tensor
from .state import BarrierArray, BarrierRef, BufferRing, BufferView


class SimView:
    backend = "sim"

    def kind(self, x) -> str:
        if isinstance(x, BufferRing):
            return "buffers"
        if isinstance(x, BufferView):
            return "buffer"
        if isinstance(x, BarrierArray):
            return "barriers"
        if isinstance(x, BarrierRef):
            return "barrier"
        if is_descriptor(x):
            return "descriptor"
        if is_tensor(x):
            return "tensor" if x.type.is_block() else "scalar"
        if isinstance(x, tl.dtype):
            return "dtype"
        if x is None:
            return "none"
        if isinstance(x, (bool, int, float, tl.constexpr)):
            return "scalar"
        return "other"

    def shape(self, x) -> tuple[int, ...]:
        if isinstance(x, BufferRing):
            return x.alloc.shape
        if isinstance(x, BufferView):
            return x.shape
        if is_descriptor(x):
            return tuple(x.block_shape)
        if is_tensor(x) and x.type.is_block():
            return tuple(x.type.shape)
        return ()

    def dtype(self, x):
        if isinstance(x, BufferRing):
            return x.alloc.dtype
        if isinstance(x, BufferView):
            return x.dtype
        if is_descriptor(x):
            return x.block_type.element_ty
        if is_tensor(x):
            return x.dtype
        return None


VIEW = SimView()
