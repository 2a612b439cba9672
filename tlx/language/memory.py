"""Local (shared-memory) buffers: allocation, views, loads and stores."""
from __future__ import annotations

import enum

from ..errors import check, expected
from ._registry import check_buffer, check_int, check_kind, tlx_op


class storage_kind(enum.Enum):
    smem = "smem"
    tmem = "tmem"
    smemCluster = "smemCluster"


@tlx_op
def local_alloc(v, shape, dtype, num, storage=storage_kind.smem, reuse=None, layout=None):
    """Allocate `num` buffers of `shape` and `dtype` in shared memory; index the result with [i].

    The shared layout is chosen by the backend (NVMMA swizzle for 2-D tiles, so TMA and wgmma
    can use them) unless `layout` pins one."""
    check(isinstance(shape, (tuple, list)) and len(shape) >= 1 and all(isinstance(s, int) and s > 0 for s in shape),
          lambda: expected("local_alloc", "shape", "a tuple of positive compile-time ints", repr(shape)))
    check_kind(v, "local_alloc", "dtype", dtype, ("dtype",))
    check_int("local_alloc", "num", num, lo=1)
    check(storage in (storage_kind.smem, "smem"),
          lambda: expected("local_alloc", "storage", "tlx.storage_kind.smem on Hopper", storage,
                           "tmem is Blackwell-only and not supported by this backend yet"))
    check(reuse is None, lambda: expected("local_alloc", "reuse", "None (buffer reuse is not supported yet)", reuse))


@tlx_op(aliases={"local_allocated_buffers": "buf", "buffer_idx": "index"})
def local_view(v, buf, index):
    """Buffer `index` of a ring from `local_alloc` (or barrier `index` of `alloc_barriers`); same as buf[index]."""
    check_kind(v, "local_view", "buf", buf, ("buffers", "barriers"))


@tlx_op(aliases={"src": "buf"})
def local_load(v, buf, token=None, layout=None):
    """Load one buffer from shared memory into registers. `token` (an `async_load` or commit-group result)
    is accepted and not needed: cp.async ordering comes from `async_load_wait_group`. The compiler picks the register layout;
    layout="wgmma_a" asks for a wgmma A operand's (a [M, K] tile, M a multiple of 64, read by many
    async_dots, such as attention's Q: loaded once, it is not read from shared memory again)."""
    check_buffer(v, "local_load", "buf", buf)
    check(layout in (None, "wgmma_a"),
          lambda: expected("local_load", "layout", 'None (the compiler\'s choice) or "wgmma_a"', repr(layout)))
    if layout == "wgmma_a":
        shape = tuple(v.shape(buf))
        check(len(shape) == 2 and shape[0] % 64 == 0,
              lambda: expected("local_load", "buf", 'a 2-D [M, K] buffer with M a multiple of 64 for layout="wgmma_a"',
                               f"shape {shape}"))


@tlx_op(aliases={"dst": "buf", "src": "value"})
def local_store(v, buf, value):
    """Store a register tensor into one buffer."""
    check_buffer(v, "local_store", "buf", buf)
    check_kind(v, "local_store", "value", value, ("tensor",))
    check(tuple(v.shape(value)) == tuple(v.shape(buf)),
          lambda: expected("local_store", "value", f"shape {tuple(v.shape(buf))} (the buffer's)", tuple(v.shape(value))))


@tlx_op(aliases={"input": "buf"})
def local_trans(v, buf, dims=(1, 0)):
    """A transposed view of a buffer (no data movement), e.g. K^T as an MMA operand."""
    check_buffer(v, "local_trans", "buf", buf)
    check(sorted(dims) == list(range(len(v.shape(buf)))),
          lambda: expected("local_trans", "dims", f"a permutation of {len(v.shape(buf))} dims", dims))


@tlx_op(aliases={"buffer": "buf"})
def local_slice(v, buf, offset, shape):
    """A sub-view of a buffer starting at `offset` with `shape` (compile-time)."""
    check_buffer(v, "local_slice", "buf", buf)
    full = tuple(v.shape(buf))
    check(len(offset) == len(full) and len(shape) == len(full),
          lambda: expected("local_slice", "offset/shape", f"{len(full)} entries each", (offset, shape)))
    for o, s, f in zip(offset, shape, full):
        check(isinstance(o, int) and isinstance(s, int) and 0 <= o and o + s <= f,
              lambda: expected("local_slice", "offset+shape", f"inside the buffer {full}", (offset, shape)))


@tlx_op(aliases={"src": "buf"})
def local_reshape(v, buf, shape):
    """A view of a buffer with another shape of the same number of elements."""
    check_buffer(v, "local_reshape", "buf", buf)
    n = 1
    for s in v.shape(buf):
        n *= s
    m = 1
    for s in shape:
        m *= s
    check(n == m, lambda: expected("local_reshape", "shape", f"{n} elements", f"{tuple(shape)} ({m} elements)"))
