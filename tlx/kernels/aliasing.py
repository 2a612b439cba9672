"""Whether an output shares memory with an input: the kernels read inputs tile by tile while other tiles'
results land, so an output over an input gives a wrong answer (C = A @ B into A, attention into V)."""
from __future__ import annotations


def byte_span(t) -> tuple[int, int]:
    """[first, last + 1) bytes a strided tensor can touch."""
    last = sum((size - 1) * stride for size, stride in zip(t.shape, t.stride()))
    return t.data_ptr(), t.data_ptr() + (last + 1) * t.element_size()


def shares_memory(x, y) -> bool:
    """Whether x and y may touch the same bytes: same storage and intersecting spans (conservative for
    interleaved strided views). Empty and fake tensors (torch.compile) touch nothing."""
    if x is None or y is None or x.numel() == 0 or y.numel() == 0 or hasattr(x, "fake_mode") or hasattr(y, "fake_mode"):
        return False
    if x.device != y.device or x.untyped_storage().data_ptr() != y.untyped_storage().data_ptr():
        return False
    (x0, x1), (y0, y1) = byte_span(x), byte_span(y)
    return x0 < y1 and y0 < x1


def overlapping_input(out, inputs: dict) -> str | None:
    """The name of the first of `inputs` (name -> tensor or None) that `out` may share memory with."""
    return next((name for name, t in inputs.items() if shares_memory(out, t)), None)
