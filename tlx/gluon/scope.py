"""Name resolution for generated Gluon code: the user's globals mapped to what the Gluon backend
compiles (tl -> the tl shim, tlx -> the tlx op module, helpers -> Gluon JIT functions)."""
from __future__ import annotations

import functools
import hashlib
import inspect
import textwrap
import types

import triton.language as tl
from triton.experimental.gluon import language as gl

from ..frontend.split import SplitKernel, register_source, split_kernel
from ..version import SOURCE_HASH
from ._triton_compat import GluonJITFunction, JITFunction
from .rules import build_tlx_module
from .tl_shim import build_tl_module


@functools.cache
def tl_module() -> types.ModuleType:
    return build_tl_module()


@functools.cache
def tlx_module() -> types.ModuleType:
    from ..language import storage_kind, warp_spec
    from ..language.tasks import async_task, async_task_replica_id, async_tasks
    spec = types.ModuleType("tlx.gluon.warp_spec")
    spec.get_bufidx_phase = rewrap_helper(warp_spec.get_bufidx_phase)
    return build_tlx_module({"warp_spec": spec, "storage_kind": storage_kind, "constexpr": gl.constexpr, "async_tasks": async_tasks,
                             "async_task": async_task, "async_task_replica_id": async_task_replica_id})


def resolve(value):
    import tlx
    from ..frontend.kernel import TlxKernel
    if value is tl:
        return tl_module()
    if value is tlx:
        return tlx_module()
    if isinstance(value, TlxKernel):
        return lower_helper(value)
    if isinstance(value, JITFunction):
        return value if getattr(value, "_tlx_generated", False) else rewrap_helper(value)
    if isinstance(value, (bool, int, float)) and not isinstance(value, gl.constexpr):
        return gl.constexpr(value)
    return value


def lookup(fn, name: str):
    """A free name of `fn` as Python would see it (closure first, then globals); KeyError if absent."""
    if fn.__closure__:
        cells = dict(zip(fn.__code__.co_freevars, fn.__closure__))
        if name in cells:
            return cells[name].cell_contents
    if name in fn.__globals__:
        return fn.__globals__[name]
    raise KeyError(name)


def scope_for(fn, names) -> dict:
    scope = {"__name__": f"{fn.__module__}.tlx"}   # generated functions need a __module__
    for name in names:
        try:
            scope[name] = resolve(lookup(fn, name))
        except KeyError:
            pass   # a Python builtin (range, min, ...) or a name bound in the kernel itself
    return scope


class PolicyJITFunction(GluonJITFunction):
    """A generated function compiled under one layout policy: the policy joins Triton's cache key, or a
    binary cached under one policy would answer an attempt under another (same source, other layouts).
    Policy 0 keeps Triton's own key."""

    @property
    def cache_key(self) -> str:
        key = super().cache_key
        policy = getattr(self, "_tlx_layout_policy", 0)
        return key if not policy else hashlib.sha256(f"{key}:layout_policy={policy}".encode()).hexdigest()


def to_jit(py_fn, noinline=False, layout_policy: int = 0) -> GluonJITFunction:
    jit_fn = PolicyJITFunction(py_fn, noinline=noinline)
    jit_fn._tlx_generated = True
    jit_fn._tlx_layout_policy = layout_policy
    return jit_fn


def instantiate(split: SplitKernel, fn, layout_policy: int = 0) -> GluonJITFunction:
    """Gluon JIT functions for a split kernel: the tasks become globals of the kernel."""
    scope = scope_for(fn, split.global_names)
    kernel_fn = split.instantiate(scope)
    for task in split.tasks:
        scope[task.name] = to_jit(scope[task.name], layout_policy=layout_policy)
    return to_jit(kernel_fn, layout_policy=layout_policy)


def lower_helper(kernel) -> GluonJITFunction:
    """A @tlx.jit function called from a kernel (no launch constexprs: it is specialized at the call)."""
    key = ("gluon-helper",)
    if key not in kernel.lowered:
        kernel.lowered[key] = instantiate(split_kernel(kernel.fn, {}), kernel.fn)
    return kernel.lowered[key]


_REWRAPPED: dict[int, GluonJITFunction] = {}


def rewrap_helper(jit_fn: JITFunction) -> GluonJITFunction:
    """A plain @triton.jit helper re-compiled with `tl` bound to the tl shim (memoised, recursive)."""
    if id(jit_fn) in _REWRAPPED:
        return _REWRAPPED[id(jit_fn)]
    fn = jit_fn.fn
    lines, first = inspect.getsourcelines(fn)
    text = textwrap.dedent("".join(lines))
    body = text.splitlines()
    def_at = next(i for i, line in enumerate(body) if line.lstrip().startswith("def "))
    body = [""] * def_at + body[def_at:] + [f"    # tlx {SOURCE_HASH}"]
    name = f"{fn.__name__}__tlx_{id(jit_fn):x}"
    body[def_at] = body[def_at].replace(f"def {fn.__name__}", f"def {name}", 1)
    src = "\n".join([""] * (first - 1) + body) + "\n"
    filename = f"<tlx helper {inspect.getsourcefile(fn)}:{fn.__name__}>"
    register_source(filename, src)
    names = set(fn.__code__.co_names) | set(fn.__code__.co_freevars)
    scope = scope_for(fn, names)
    scope.setdefault("tl", tl_module())   # signature annotations (tl.constexpr) need it before exec
    exec(compile(src, filename, "exec"), scope)
    wrapped = to_jit(scope[name], noinline=jit_fn.noinline)
    _REWRAPPED[id(jit_fn)] = wrapped
    return wrapped
