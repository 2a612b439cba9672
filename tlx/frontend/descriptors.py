"""Host-side TMA descriptors. Users build them without a layout (the lowering picks it); both
Triton's `triton.tools.tensor_descriptor.TensorDescriptor` and `tlx.TensorDescriptor` work."""
from __future__ import annotations

from dataclasses import dataclass

from triton.tools.tensor_descriptor import TensorDescriptor as TritonTensorDescriptor


@dataclass
class TensorDescriptor(TritonTensorDescriptor):
    """A TMA descriptor over a tensor: `TensorDescriptor.from_tensor(t, block_shape)`.

    The block shape may be set (or changed) later, e.g. by an autotuner pre-hook; the shared
    layout is chosen when the kernel is compiled."""

    @staticmethod
    def from_tensor(tensor, block_shape, padding="zero"):
        return TensorDescriptor(tensor, list(tensor.shape), list(tensor.stride()), list(block_shape), padding)


def is_host_descriptor(x) -> bool:
    return isinstance(x, TritonTensorDescriptor)
