"""`@tlx.jit`: the kernel object. It binds launch arguments, picks the backend and keeps one split
(and, per backend, one lowered function) per constexpr specialization."""
from __future__ import annotations

import functools
import inspect
import os
from typing import Any, Callable

from triton.runtime.jit import KernelInterface

from ..errors import TlxLaunchError
from .split import SplitKernel, split_kernel

BACKENDS = ("gluon", "sim")


def _is_constexpr_annotation(ann) -> bool:
    if ann is inspect.Parameter.empty:
        return False
    text = ann if isinstance(ann, str) else getattr(ann, "__name__", repr(ann))
    return "constexpr" in str(text)


class TlxKernel(KernelInterface):
    """A kernel written with `tl.*` and `tlx.*`. Launch: `kernel[grid](*args, num_warps=4, **constexprs)`;
    `backend="sim"` (or TLX_BACKEND=sim) runs it on the CPU simulator."""

    def __init__(self, fn: Callable, do_not_specialize=(), noinline: bool = False):
        self.fn = fn
        self.__name__ = fn.__name__
        self.__qualname__ = fn.__qualname__
        self.__doc__ = fn.__doc__
        self.__module__ = fn.__module__
        self.signature = inspect.signature(fn)
        self.params = list(self.signature.parameters.values())
        self.arg_names = [p.name for p in self.params]
        self.constexpr_names = frozenset(p.name for p in self.params if _is_constexpr_annotation(p.annotation))
        self._constexpr_order = tuple(n for n in self.arg_names if n in self.constexpr_names)
        self.do_not_specialize = tuple(do_not_specialize)
        self.noinline = noinline
        self._splits: dict[tuple, SplitKernel] = {}
        self.lowered: dict[tuple, Any] = {}   # backend-owned cache: (backend, constexpr key) -> object

    def __repr__(self) -> str:
        return f"TlxKernel({self.fn.__module__}.{self.fn.__qualname__})"

    def __call__(self, *args, **kwargs):
        raise TlxLaunchError(f"tlx.jit: kernel '{self.__name__}' must be launched as {self.__name__}[grid](...), "
                             "or called from another @tlx.jit function")

    # -- binding ---------------------------------------------------------------------------
    def bind(self, args: tuple, kwargs: dict) -> dict[str, Any]:
        """Map every parameter to its value (defaults applied); raises TlxLaunchError on a bad count."""
        names = self.arg_names
        if len(args) + len(kwargs) == len(names) and all(n in kwargs for n in names[len(args):]):
            bound = dict(zip(names, args))          # fast path: every argument given, no defaults
            bound.update((n, kwargs[n]) for n in names[len(args):])
            return bound
        try:
            bound = self.signature.bind(*args, **kwargs)
        except TypeError as e:
            want = ", ".join(self.arg_names)
            raise TlxLaunchError(f"tlx.jit: kernel '{self.__name__}({want})' got {len(args)} positional "
                                 f"argument(s) and {sorted(kwargs)}: {e}") from None
        bound.apply_defaults()
        return dict(bound.arguments)

    def constexpr_key(self, bound: dict[str, Any]) -> tuple:
        return tuple((n, _constexpr_value(bound[n])) for n in self._constexpr_order)

    def split(self, bound: dict[str, Any]) -> SplitKernel:
        key = self.constexpr_key(bound)
        if key not in self._splits:
            self._splits[key] = split_kernel(self.fn, dict(key))
        return self._splits[key]

    # -- launch ----------------------------------------------------------------------------
    def bind_launch(self, args: tuple, kwargs: dict, backend: str | None, num_ctas: int = 1):
        """(backend, bound arguments) of a launch; Triton launch options tlx does not use are dropped (a
        compile-only build, tlx.compile, takes the same arguments as the launch it stands for)."""
        backend = backend or os.environ.get("TLX_BACKEND", "gluon")
        if backend not in BACKENDS:
            raise TlxLaunchError(f"tlx.jit: 'backend' must be one of {BACKENDS}, got {backend!r}")
        if num_ctas != 1:
            raise TlxLaunchError(f"tlx.jit: 'num_ctas' must be 1 (clusters are launched with ctas_per_cga), "
                                 f"got {num_ctas}")
        _refuse_unhonoured_options(kwargs, backend)
        kwargs = {k: v for k, v in kwargs.items() if k not in LAUNCH_OPTIONS}
        return backend, self.bind(args, kwargs)

    def run(self, *args, grid, warmup=False, backend: str | None = None, num_warps: int = 4, num_stages=None,
            num_ctas: int = 1, sim_options=None, **kwargs):
        ctas_per_cga = kwargs.get("ctas_per_cga")
        backend, bound = self.bind_launch(args, kwargs, backend, num_ctas)
        if backend == "sim":
            from .. import sim
            if callable(grid):
                grid = grid(bound)
            return sim.launch(self, tuple(grid), bound, num_warps, sim_options, ctas_per_cga)
        from ..gluon import launch
        if _clustered(ctas_per_cga) and not warmup:     # a cluster launch goes through the prepared path
            return launch.prepare(self, bound, grid, num_warps=num_warps, num_stages=num_stages,
                                  ctas_per_cga=ctas_per_cga)()
        return launch.run(self, bound, grid=grid, warmup=warmup, num_warps=num_warps, num_stages=num_stages)

    def prepare(self, *args, grid, backend: str | None = None, num_warps: int = 4, num_stages=None,
                num_ctas: int = 1, sim_options=None, **kwargs):
        """The launch `kernel[grid](*args, ...)` done ahead: returns a callable that repeats it. On the GPU
        each call is one driver launch (no binding, specialization or descriptor building) and holds no
        tensor alive, so reuse it only for tensors at the same addresses with the same shapes and strides.
        On the simulator it simply repeats `run`."""
        ctas_per_cga = kwargs.get("ctas_per_cga")
        backend, bound = self.bind_launch(args, kwargs, backend, num_ctas)
        if backend == "sim":
            return functools.partial(self.run, *args, grid=grid, backend=backend, num_warps=num_warps,
                                     sim_options=sim_options, **kwargs)
        from ..gluon import launch
        return launch.prepare(self, bound, grid, num_warps=num_warps, num_stages=num_stages,
                              ctas_per_cga=ctas_per_cga if _clustered(ctas_per_cga) else None)

    def warmup(self, *args, grid, **kwargs):
        return self.run(*args, grid=grid, warmup=True, **kwargs)


# Triton launch options tlx accepts only at their no-op values (anything else would be silently ignored)
UNUSED_LAUNCH_OPTIONS = {
    "maxnreg": "None (each async_task sets its own register count: async_task(registers=...))",
    "launch_cooperative_grid": "False (cooperative grid launches are not supported)",
}
LAUNCH_OPTIONS = ("ctas_per_cga", *UNUSED_LAUNCH_OPTIONS)     # taken out of the kernel's arguments


def _clustered(ctas_per_cga) -> bool:
    return ctas_per_cga is not None and tuple(ctas_per_cga) != (1, 1, 1)


def _refuse_unhonoured_options(kwargs: dict, backend: str) -> None:
    cluster = kwargs.get("ctas_per_cga")
    # the simulator runs any cluster shape; the GPU lowering ranks CTAs along x only, and Hopper's portable
    # cluster size is at most 8 CTAs
    if _clustered(cluster) and backend != "sim":
        n, *rest = tuple(cluster)
        if tuple(rest) not in ((), (1,), (1, 1)) or not 1 <= n <= 8:
            raise TlxLaunchError(f"tlx.jit: 'ctas_per_cga' on the GPU must be (n, 1, 1) with 1 <= n <= 8, "
                                 f"got {cluster!r}")
    for name, allowed in UNUSED_LAUNCH_OPTIONS.items():
        v = kwargs.get(name)
        if v is not None and v is not False:
            raise TlxLaunchError(f"tlx.jit: launch option '{name}' must be {allowed}, got {v!r}")


def _constexpr_value(v):
    return getattr(v, "value", v)


def jit(fn: Callable | None = None, *, do_not_specialize=(), noinline: bool = False, **unused):
    """Decorator: compile `fn` (written with `tl.*` and `tlx.*`) with tlx."""
    if fn is None:
        return functools.partial(jit, do_not_specialize=do_not_specialize, noinline=noinline)
    return TlxKernel(fn, do_not_specialize=do_not_specialize, noinline=noinline)
