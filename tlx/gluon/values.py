"""tlx's values in the Gluon backend: buffer rings and barrier arrays (shared-memory descriptors
that know what they hold and support `ring[i]`), and the ValueView the op declarations check with."""
from __future__ import annotations

from triton.experimental.gluon import language as gl

from ._triton_compat import builtin, gl_core, gluon_tensor_descriptor, shared_memory_descriptor, \
    shared_memory_descriptor_type

RING_KINDS = {"buffers": "buffer", "barriers": "barrier"}


class TlxMemType(shared_memory_descriptor_type):
    def __init__(self, element_ty, shape, layout, alloc_shape, kind, arrive_count=1):
        super().__init__(element_ty, shape, layout, alloc_shape)
        self.kind = kind
        self.arrive_count = arrive_count

    def _unflatten_ir(self, handles, cursor):
        return TlxMem(handles[cursor], self), cursor + 1

    def __eq__(self, other) -> bool:
        return super().__eq__(other) and self.kind == other.kind

    def mangle(self) -> str:
        return f"{self.kind[:3]}{super().mangle()}"


class TlxMem(shared_memory_descriptor):
    """A shared-memory descriptor with a kind: buffers/buffer (data) or barriers/barrier (mbarriers)."""

    def __init__(self, handle, ty: TlxMemType):
        self.handle = handle
        self.type = ty

    @staticmethod
    def wrap(desc, kind: str, arrive_count: int = 1) -> "TlxMem":
        t = desc.type
        return TlxMem(desc.handle, TlxMemType(t.element_ty, t.shape, t.layout, t.alloc_shape, kind, arrive_count))

    @property
    def kind(self) -> str:
        return self.type.kind

    @builtin
    def __getitem__(self, index, _semantic=None):
        return index_ring(self, index, _semantic)


def index_ring(ring: TlxMem, index, semantic) -> TlxMem:
    from ..errors import TlxCompileError
    if ring.kind not in RING_KINDS:
        raise TlxCompileError(f"tlx.local_view: 'buf' must be a buffer ring or barrier array, got one {ring.kind} "
                              f"(it was already indexed)")
    index = gl_core._unwrap_if_constexpr(index)
    if isinstance(index, int) and not 0 <= index < ring.shape[0]:
        raise TlxCompileError(f"tlx.local_view: index must be in [0, {ring.shape[0]}), got {index}")
    view = semantic.memdesc_index(ring, semantic.to_tensor(index) if isinstance(index, int) else index)
    return TlxMem.wrap(view, RING_KINDS[ring.kind], ring.type.arrive_count)


class GluonView:
    """ValueView for the declarations: what a Gluon-level value is."""
    backend = "gluon"

    def kind(self, x) -> str:
        x = gl_core._unwrap_if_constexpr(x)
        if isinstance(x, TlxMem):
            return x.kind
        if isinstance(x, shared_memory_descriptor):
            return "buffer"
        if isinstance(x, gluon_tensor_descriptor):
            return "descriptor"
        if hasattr(getattr(x, "type", None), "tensor_type"):   # in-flight wgmma accumulator
            return "tensor"
        if isinstance(x, gl.tensor):
            return "tensor" if x.type.is_block() else "scalar"
        if isinstance(x, gl.dtype):
            return "dtype"
        if x is None:
            return "none"
        if isinstance(x, (int, float, bool)):
            return "scalar"
        return "other"

    def shape(self, x):
        x = gl_core._unwrap_if_constexpr(x)
        if isinstance(x, shared_memory_descriptor):
            return [int(s) for s in x.shape]
        if isinstance(x, gluon_tensor_descriptor):
            return [int(s) for s in x.block_shape]
        if hasattr(getattr(x, "type", None), "tensor_type"):
            x = x.type.tensor_type
        return [int(gl_core._unwrap_if_constexpr(s)) for s in getattr(x, "shape", [])]

    def dtype(self, x):
        return getattr(gl_core._unwrap_if_constexpr(x), "dtype", None)


VIEW = GluonView()
