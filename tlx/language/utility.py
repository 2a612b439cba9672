"""Small utilities: thread ids, clocks, dtype facts, layout introspection."""
from __future__ import annotations

from ..errors import check, expected
from ._registry import check_kind, tlx_op


@tlx_op
def thread_id(v, axis):
    """The thread's index along `axis` (0, 1, 2) within the CTA (%tid)."""
    check(axis in (0, 1, 2), lambda: expected("thread_id", "axis", "0, 1 or 2", axis))


@tlx_op
def clock64(v):
    """The SM's 64-bit cycle counter."""


@tlx_op
def globaltimer(v):
    """The GPU's 64-bit nanosecond timer (%globaltimer): one time base for every SM, unlike clock64,
    so stamps from different programs line up on one timeline."""


@tlx_op(aliases={"v": "x"})
def dtype_of(v, x):
    """The element dtype of a tensor, buffer or descriptor (compile-time)."""


@tlx_op
def size_of(v, dtype):
    """Bytes per element of `dtype` (compile-time)."""
    check_kind(v, "size_of", "dtype", dtype, ("dtype",))


@tlx_op
def dump_layout(v, x):
    """Print the layout the compiler chose for `x` while the kernel compiles (a cache hit prints nothing;
    TRITON_ALWAYS_COMPILE=1 forces a compile); returns nothing."""


@tlx_op
def require_layout(v, x, layout):
    """Pin the layout of tensor `x` to `layout` (a Gluon layout); returns the converted tensor."""
    check_kind(v, "require_layout", "x", x, ("tensor",))
