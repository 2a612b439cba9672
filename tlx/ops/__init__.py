"""torch custom ops over the tlx kernels: `torch.ops.tlx.<name>` (with fake-tensor implementations)."""
from .attention import attention
from .matmul import matmul

__all__ = ["attention", "matmul"]
