"""The one module of the simulator that touches Triton's private interpreter.

`tl.*` code runs on `triton.runtime.interpreter`: its builder implements every `tl` op with
numpy. We patch `triton.language` the way `GridExecutor` does, set program ids ourselves and
convert launch arguments with its `_implicit_cvt`. A triton version bump touches this file only.
"""
from __future__ import annotations

import contextlib
import inspect

import numpy as np
import triton.language as tl
import triton.language.core as tl_core  # noqa: F401  (found by _patch_lang: tl's own @jit helpers call core.*)
from triton.runtime import interpreter as _interp
from triton.runtime.jit import JITFunction
from triton.tools.tensor_descriptor import TensorDescriptor as TritonTensorDescriptor

from .errors import LivelockError
from .scheduler import _current

TensorHandle = _interp.TensorHandle
TensorDescHandle = _interp.TensorDescHandle
builder = _interp.interpreter_builder


def np_dtype(dtype: tl.dtype) -> np.dtype:
    """The numpy storage dtype of a triton dtype (bf16 as uint16, fp8 as uint8, as the interpreter does)."""
    return _interp._get_np_dtype(dtype)


@contextlib.contextmanager
def patched_language():
    """Route `tl.*` builtins to the numpy interpreter for the duration of a launch."""
    def probe():  # _patch_lang finds the language modules through a function's globals (ours import tl)
        pass
    scope = _interp._patch_lang(probe)
    # tl's own @jit helpers (tl.cdiv, reductions' combine fns) run as plain Python, as under TRITON_INTERPRET
    scope.set_attr(JITFunction, "__call__", lambda self, *args, **kwargs: self.fn(*args, **kwargs))
    # the interpreter keeps scalars as 1-element arrays; numpy >= 2.4 refuses int()/bool() of those
    scope.set_attr(tl.tensor, "__index__", lambda self: to_int(self))
    scope.set_attr(tl.tensor, "__bool__", lambda self: True if self.handle.data.size != 1  # as the interpreter
                   else bool(np.asarray(self.handle.data).reshape(-1)[0]))
    scope.set_attr(builder, "create_inline_asm", _inline_asm)   # the interpreter refuses every asm block
    for name, (ptr, mask) in _POINTER_OPS.items():                 # an address outside every tensor: a report,
        scope.set_attr(builder, name, _bounds_checked(getattr(builder, name), name, ptr, mask))  # not a crash
    for name in ("create_atomic_rmw", "create_atomic_cas"):       # a spin on global memory must not hang
        scope.set_attr(builder, name, _spin_checked(getattr(builder, name)))
    try:
        yield
    finally:
        scope.restore()


class _AsmResults:
    def __init__(self, handles):
        self._handles = handles

    def get_result(self, i):
        return self._handles[i]


def _inline_asm(asm, constraints, values, types, is_pure, pack):
    from .ptx import elementwise
    result = elementwise(asm, constraints, [v.data for v in values], len(types), pack)
    dtype = getattr(types[0], "element_ty", types[0])
    if dtype != tl.float32:
        from ..errors import TlxUnsupported
        raise TlxUnsupported("tl.inline_asm_elementwise", "sim", f"its PTX instructions return float32, got {dtype}")
    return _AsmResults([TensorHandle(result, tl.float32)])


# builder method: (its pointer parameter, its mask parameter or None)
_POINTER_OPS = {"create_load": ("ptr", None), "create_store": ("ptr", None), "create_masked_load": ("ptrs", "mask"),
                "create_masked_store": ("ptrs", "mask"), "create_atomic_rmw": ("ptr", "mask"),
                "create_atomic_cas": ("ptr", None)}
_OP_NAMES = {"create_load": "tl.load", "create_store": "tl.store", "create_masked_load": "tl.load",
             "create_masked_store": "tl.store", "create_atomic_rmw": "tl.atomic_rmw",
             "create_atomic_cas": "tl.atomic_cas"}


class Allocations:
    """The launch's tensor arguments as sorted address ranges [start, end) of their storage."""
    def __init__(self, named: dict):
        ranges = sorted((int(t.untyped_storage().data_ptr()), int(t.untyped_storage().nbytes()), name)
                        for name, t in named.items())
        self.starts = np.array([r[0] for r in ranges], dtype=np.uint64)
        self.ends = np.array([r[0] + r[1] for r in ranges], dtype=np.uint64)
        self.names = [r[2] for r in ranges]

    def outside(self, addrs: np.ndarray, nbytes: int) -> np.ndarray:
        """Which of the addresses (uint64) do not start an nbytes access inside one range."""
        i = np.searchsorted(self.starts, addrs, side="right").astype(np.int64) - 1
        inside = (i >= 0) & (addrs + np.uint64(nbytes) <= self.ends[np.maximum(i, 0)])
        return ~inside

    def nearest(self, addr: int) -> str:
        if not self.names:
            return "the launch has no tensor arguments"
        gaps = [(max(int(s) - addr, addr - int(e) + 1, 0), n, int(s), int(e))
                for s, e, n in zip(self.starts, self.ends, self.names)]
        _, name, start, end = min(gaps)
        where = f"{addr - end} bytes past its end" if addr >= end else f"{start - addr} bytes before its start"
        return f"nearest tensor argument: '{name}' ({end - start} bytes), {where}"


_allocations: Allocations | None = None


def set_allocations(named: dict) -> None:
    """The tensors (name -> torch tensor) the launch's pointer accesses may touch."""
    global _allocations
    _allocations = Allocations(named)


def _bounds_checked(create, name, ptr_name, mask_name):
    """A pointer op that first checks every unmasked lane's address against the launch's tensors."""
    signature = inspect.signature(create)

    def checked(*args, **kwargs):
        if _allocations is not None:
            bound = signature.bind(*args, **kwargs).arguments
            ptr, mask = bound[ptr_name], bound.get(mask_name) if mask_name else None
            addrs = np.asarray(ptr.data).astype(np.uint64).reshape(-1)
            live = np.ones(addrs.shape, dtype=bool) if mask is None else \
                np.broadcast_to(np.asarray(mask.data), np.asarray(ptr.data).shape).reshape(-1).astype(bool)
            nbytes = max(1, ptr.get_element_ty().primitive_bitwidth // 8)
            bad = _allocations.outside(addrs, nbytes) & live
            if bad.any():
                from .errors import GlobalBoundsError, Site
                task = getattr(_current, "task", None)
                op = _OP_NAMES[name]
                site = task.program.site(task, op) if task is not None else Site(op=op)
                addr = int(addrs[bad][0])
                raise GlobalBoundsError(f"{op} at address {addr:#x} ({int(bad.sum())} of {int(live.sum())} unmasked "
                                        f"lanes) is outside every tensor argument", site,
                                        details=_allocations.nearest(addr) + "; mask the lanes past the end, or "
                                        "check the offsets")
        return create(*args, **kwargs)
    return checked


SPIN_LIMIT = 10_000     # identical atomic results in a row at one address: a spin that can never end


def _spin_checked(create):
    """An atomic that counts, per task, how often in a row it returned the same value from the same
    address. Programs run one after another (earliest first) and a task's atomics do not yield, so a
    value only a later program (or nothing) would write never comes: report a livelock, not a hang."""
    def checked(*args):
        result = create(*args)
        task = getattr(_current, "task", None)
        if task is None:
            return result
        ptr = args[1] if len(args) == 6 else args[0]          # rmw (op, ptr, ...), cas (ptr, ...)
        key = (np.asarray(ptr.data).tobytes(), np.asarray(result.data).tobytes())
        count = task.async_state.get("spin", (None, 0))
        count = (key, count[1] + 1 if count[0] == key else 1)
        task.async_state["spin"] = count
        if count[1] > SPIN_LIMIT:
            raise LivelockError(f"{SPIN_LIMIT} atomics in a row read the same value from one global address: a "
                                "spin-wait that nothing will end (programs run one after another, earliest first; "
                                "on the GPU it waits on a later program, which may not be resident)",
                                task.program.site(task, "atomic"))
        return result
    return checked


def set_grid(grid: tuple[int, int, int]) -> None:
    builder.set_grid_dim(*grid)


def set_program_id(pid: tuple[int, int, int]) -> None:
    builder.set_grid_idx(*pid)


def kernel_arg(value):
    """A launch argument as the interpreter sees it: tensors become pointers, descriptors device descriptors."""
    if isinstance(value, np.ndarray):
        import torch
        value = torch.from_numpy(value)
    if not isinstance(value, TritonTensorDescriptor) and _is_descriptor_like(value):
        value = TritonTensorDescriptor(value.base, list(value.shape), list(value.strides), list(value.block_shape),
                                       getattr(value, "padding", "zero"))
    return _interp._implicit_cvt(value)


def _is_descriptor_like(value) -> bool:
    return all(hasattr(value, a) for a in ("base", "shape", "strides", "block_shape")) and \
        hasattr(value.base, "data_ptr")


def make_tensor(data: np.ndarray, dtype: tl.dtype) -> tl.tensor:
    """A register tensor over `data` (a block of `dtype`, or a scalar when `data` is 0-d)."""
    data = np.asarray(data)
    ty = tl.block_type(dtype, list(data.shape)) if data.ndim else dtype
    return tl.tensor(TensorHandle(data, dtype), ty)


def index_handles(offsets) -> list:
    return [TensorHandle(np.array(to_int(o), dtype=np.int32), tl.int32) for o in offsets]


def descriptor_load(desc: tl.tensor_descriptor, offsets) -> np.ndarray:
    """The box at `offsets`, out-of-bounds elements zero-filled (the descriptor's padding)."""
    return builder.create_descriptor_load(desc.handle, index_handles(offsets), None, None).data


def descriptor_store(desc: tl.tensor_descriptor, data: np.ndarray, offsets) -> None:
    """Store the box at `offsets`; out-of-bounds elements are dropped."""
    dtype = desc.block_type.element_ty
    builder.create_descriptor_store(desc.handle, TensorHandle(data, dtype), index_handles(offsets))


def pointer_load(ptrs: tl.tensor, mask) -> np.ndarray:
    """Gather through a pointer tensor; masked-off lanes read as zero."""
    dtype = ptrs.dtype.element_ty
    shape = ptrs.handle.data.shape
    mask_data = np.ones(shape, dtype=bool) if mask is None else np.broadcast_to(_data(mask), shape)
    other = TensorHandle(np.zeros(shape, dtype=np_dtype(dtype)), dtype)
    return builder.create_masked_load(ptrs.handle, TensorHandle(mask_data, tl.int1), other, None, None, False).data


def _data(x):
    return x.handle.data if isinstance(x, tl.tensor) else np.asarray(x)


def to_int(x) -> int:
    """A Python int from an int, a constexpr or a scalar interpreter tensor."""
    x = getattr(x, "value", x) if isinstance(x, tl.constexpr) else x
    if isinstance(x, tl.tensor):
        return int(np.asarray(x.handle.data).reshape(-1)[0])
    return int(x)


def is_tensor(x) -> bool:
    return isinstance(x, tl.tensor) and not isinstance(x, tl.core.tensor_descriptor_base)


def is_descriptor(x) -> bool:
    return isinstance(x, tl.core.tensor_descriptor_base)


def as_float32(data: np.ndarray, dtype: tl.dtype) -> np.ndarray:
    """Values of a stored array as float32 (bf16 is stored as uint16 bits, as the interpreter does)."""
    data = np.asarray(data)
    if dtype == tl.bfloat16:
        return _interp._convert_float(data, tl.bfloat16, tl.float32, None).view(np.float32).reshape(data.shape)
    return data.astype(np.float32)
