"""The `tl` that tlx kernels see under the Gluon backend.

Most `triton.language` builtins already work under Gluon's semantic and are passed through.
Ops that need a layout (creation ops, pointer loads/stores, dot, descriptors) are re-implemented
here; any other `tl` name raises an error that names it."""
from __future__ import annotations

import types

import triton.language as tl
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.ampere import mma_v2

from ..errors import TlxUnsupported
from . import layouts
from ._triton_compat import builtin, gl_core

PASS_THROUGH = """
program_id num_programs load cdiv where maximum minimum exp exp2 log log2 sqrt sqrt_rn rsqrt abs fma sin cos erf floor ceil
div_rn fdiv umulhi cast expand_dims reshape broadcast
broadcast_to ravel multiple_of max_contiguous max_constancy static_assert static_print device_print
device_assert assume range static_range constexpr tensor dtype pointer_type block_type tuple sigmoid
clamp flip interleave inline_asm_elementwise
int1 int8 int16 int32 int64 uint8 uint16 uint32 uint64 float16 bfloat16 float32 float64 float8e4nv float8e5
float8e4b15 void PropagateNan
""".split()

_unwrap = gl_core._unwrap_if_constexpr


def _num_warps(_semantic, _generator):
    return _unwrap(gl.num_warps(_semantic=_semantic, _generator=_generator))


@builtin
def arange(start, end, _semantic=None):
    return gl.arange(start, end, _semantic=_semantic)


@builtin
def zeros(shape, dtype, _semantic=None):
    return gl.full(shape, 0, dtype, _semantic=_semantic)


@builtin
def full(shape, value, dtype, _semantic=None):
    return gl.full(shape, value, dtype, _semantic=_semantic)


@builtin
def zeros_like(input, dtype=None, _semantic=None):
    return gl.full(input.shape, 0, dtype or input.dtype, _semantic=_semantic)


@builtin
def full_like(input, value, dtype=None, _semantic=None):
    return gl.full(input.shape, value, dtype or input.dtype, _semantic=_semantic)


def _is_auto(t) -> bool:
    return isinstance(t, gl.tensor) and t.type.is_block() and isinstance(t.type.layout, gl.AutoLayout)


@builtin
def store(pointer, value, mask=None, boundary_check=(), cache_modifier="", eviction_policy="", _semantic=None,
          _generator=None):
    if isinstance(pointer, gl.tensor) and pointer.type.is_block():
        value = _semantic.to_tensor(value) if not isinstance(value, gl.tensor) else value
        pointer = _anchor_pointer(pointer, value, _semantic, _generator)
        if _is_auto(mask) and not _is_auto(pointer) and list(mask.shape) == list(pointer.shape):
            # the mask shares its index vectors with the pointer (offs_m feeds both): anchor it with the
            # pointer's layout, or a value in another layout (an MMA accumulator) would pull those vectors
            # into two layouts at once
            mask = _semantic.set_auto_layout(mask, pointer.type.layout)
    return tl.store(pointer, value, mask=mask, boundary_check=boundary_check, cache_modifier=cache_modifier,
                    eviction_policy=eviction_policy, _semantic=_semantic)


def _anchor_pointer(pointer, value, semantic, generator, lazy_1d=True):
    """Coalesced stores: anchor an Auto pointer with the default blocked layout (a concrete value is then
    converted to it), except for 1-D values that already have a layout (row statistics in a slice of an
    MMA layout): their index vector usually has that layout already."""
    if not _is_auto(pointer):
        return pointer
    vl = value.type.layout if isinstance(value, gl.tensor) and value.type.is_block() else None
    if lazy_1d and len(pointer.shape) == 1 and (vl is None or isinstance(vl, gl.AutoLayout)) and \
            not semantic.anchor_1d_stores:
        # A 1-D index vector often also indexes a 2-D tile (row statistics): let that anchor it. A kernel
        # whose 1-D stores are its only anchors fails this attempt and is compiled again with them.
        return pointer
    if vl is not None and not isinstance(vl, gl.AutoLayout) and len(value.shape) == 1 \
            and list(value.shape) == list(pointer.shape):
        return semantic.set_auto_layout(pointer, vl)
    return semantic.set_auto_layout(pointer, layouts.blocked_for(pointer.shape, _num_warps(semantic, generator)))


def _atomic(name):
    op = getattr(tl, name)

    @builtin
    def atomic(pointer, val, mask=None, sem=None, scope=None, _semantic=None, _generator=None):
        if isinstance(pointer, gl.tensor) and pointer.type.is_block():
            pointer = _anchor_pointer(pointer, val, _semantic, _generator, lazy_1d=False)
            layout = pointer.type.layout   # atomics do not unify operand layouts: give all of them the pointer's
            if isinstance(val, gl.tensor) and val.type.is_block():
                val = _semantic.to_layout(val, layout)
            if isinstance(mask, gl.tensor) and mask.type.is_block():
                mask = _semantic.to_layout(mask, layout)
        return op(pointer, val, mask=mask, sem=sem, scope=scope, _semantic=_semantic)
    atomic.__name__ = name
    return atomic


@builtin
def dot(input, other, acc=None, input_precision=None, allow_tf32=None, max_num_imprecise_acc=None,
        out_dtype=tl.float32, _semantic=None, _generator=None):
    """Synchronous register MMA (mma.sync). For wgmma from shared memory use tlx.async_dot."""
    from .rules import Ctx
    ctx = Ctx(_semantic, _generator)
    layout = layouts.mma_v2_layout(ctx.num_warps)
    a = ctx.convert(input, gl.DotOperandLayout(0, layout, layouts.k_width(input.dtype)))
    b = ctx.convert(other, gl.DotOperandLayout(1, layout, layouts.k_width(other.dtype)))
    shape = [input.shape[0], other.shape[1]]
    acc = gl.full(shape, 0.0, _unwrap(out_dtype), layout, _semantic=_semantic) if acc is None \
        else _semantic.to_layout(acc, layout)
    return mma_v2(a, b, acc, _semantic=_semantic)


@builtin
def make_tensor_descriptor(base, shape, strides, block_shape, padding_option="zero", _semantic=None,
                           _generator=None):
    from .rules import Ctx
    from .tma import make_descriptor
    unwrap = lambda xs: [_unwrap(x) for x in (xs.values if hasattr(xs, "values") else xs)]  # noqa: E731
    return make_descriptor(Ctx(_semantic, _generator), base, unwrap(shape), unwrap(strides), unwrap(block_shape))


def _anchored(op_name):
    """split/join abort the process on Auto-layout inputs in Gluon 3.6, and layouts inferred backwards
    through trans/permute/reshape conflict with the input's other uses: anchor the inputs first (with
    the shape's default layout, which every other anchor of that shape agrees with)."""
    op = getattr(tl, op_name)

    @builtin
    def anchored(*args, _semantic=None, _generator=None, **kwargs):
        nw = _num_warps(_semantic, _generator)
        args = [_semantic.set_auto_layout(a, layouts.blocked_for(a.shape, nw)) if _is_auto(a) else a for a in args]
        return op(*args, _semantic=_semantic, **kwargs)
    anchored.__name__ = op_name
    return anchored


def _anchored_input(op_name):
    """Reductions and scans of an Auto-layout input: Gluon 3.6 cannot infer the input's layout back
    from a reduced result (a 1-D store of row sums fails), so anchor the input with its shape's default."""
    op = getattr(tl, op_name)

    @builtin
    def anchored(input, *args, _semantic=None, _generator=None, **kwargs):
        if _is_auto(input):
            input = _semantic.set_auto_layout(input, layouts.blocked_for(input.shape,
                                                                        _num_warps(_semantic, _generator)))
        if getattr(op, "__triton_builtin__", False):
            return op(input, *args, _semantic=_semantic, _generator=_generator, **kwargs)
        return _generator.call_JitFunction(op, (input, *args), kwargs)
    anchored.__name__ = op_name
    return anchored


REDUCTIONS = "sum max min argmax argmin xor_sum reduce softmax cumsum cumprod associative_scan".split()

OVERRIDES = {
    **{name: _anchored_input(name) for name in REDUCTIONS},
    "split": _anchored("split"), "join": _anchored("join"), "trans": _anchored("trans"),
    "permute": _anchored("permute"),
    "arange": arange, "zeros": zeros, "full": full, "zeros_like": zeros_like, "full_like": full_like,
    "store": store, "dot": dot, "make_tensor_descriptor": make_tensor_descriptor,
    **{name: _atomic(name) for name in ("atomic_add", "atomic_max", "atomic_min", "atomic_and", "atomic_or",
                                        "atomic_xor", "atomic_xchg")},
}


class UnsupportedTlName(TlxUnsupported, AttributeError):
    """A `tl` name outside the subset tlx lowers (an AttributeError too, so hasattr() stays safe)."""


def _missing_in(module: str):
    """A module `__getattr__` that names the missing `<module>.<name>` (dunder lookups stay AttributeErrors)."""
    def missing(name: str):
        if name.startswith("__"):
            raise AttributeError(name)
        raise UnsupportedTlName(f"{module}.{name}", "gluon", "not in the tl subset tlx lowers (docs/ops.md lists it)")
    return missing


def build_tl_module() -> types.ModuleType:
    mod = types.ModuleType("tlx.gluon.tl")
    for name in PASS_THROUGH:
        if hasattr(tl, name):
            setattr(mod, name, getattr(tl, name))
    for name, value in OVERRIDES.items():
        setattr(mod, name, value)
    mod.math = _math_module()
    mod.__getattr__ = _missing_in("tl")
    return mod


def _math_module() -> types.ModuleType:
    """`tl.math.exp2` and friends: Triton's `tl.math` names, each the same builtin as `tl.<name>`."""
    math = types.ModuleType("tlx.gluon.tl.math")
    for name in dir(tl.math):
        if name in PASS_THROUGH:
            setattr(math, name, getattr(tl, name))
    math.__getattr__ = _missing_in("tl.math")
    return math
