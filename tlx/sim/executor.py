"""`launch`: run a @tlx.jit kernel on the CPU simulator.

For each schedule and each program id, a fresh `ProgramState` runs the kernel's trunk as a task;
`warp_specialize` adds the partitions as more tasks. `tl.*` runs on Triton's numpy interpreter.
"""
from __future__ import annotations

import builtins
import inspect
import itertools
import sys
import types

import numpy as np

import triton

from . import interp
from .clock import VectorClock
from .errors import ProtocolError, SimReport, Site
from .options import SimOptions
from .rules import sim_tlx_module
from .scheduler import Task
from .sites import HELPER_FILES, register_generated
from .state import ClusterState, ProgramState

_HELPERS: dict[int, types.FunctionType] = {}


def launch(kernel, grid, bound_args: dict, num_warps: int = 4, options: SimOptions | None = None,
           ctas_per_cga=None) -> SimReport:
    """Simulate `kernel[grid](**bound_args)`; raise the first ProtocolError, or collect them all
    (`options.collect_all`) in the returned `SimReport`. `ctas_per_cga` (x, y, z): the programs run in
    clusters of that shape, each cluster's CTAs interleaved under one scheduler (cluster ops, multicast
    loads and remote arrivals); without it each program runs alone."""
    options = options or SimOptions()
    grid = _grid3(grid(bound_args) if callable(grid) else grid)
    dims = cluster_dims(ctas_per_cga, grid)
    fn = kernel_function(kernel, bound_args)
    constexprs = kernel.constexpr_names
    args = {name: (resolve(getattr(v, "value", v)) if name in constexprs else interp.kernel_arg(v))
            for name, v in bound_args.items()}   # a @tlx.jit function may be passed as a constexpr
    originals = _snapshot(bound_args) if options.schedules > 1 else []
    report = SimReport(kernel.__name__, options.schedules, grid[0] * grid[1] * grid[2])
    interp.set_allocations(_tensor_arguments(bound_args))
    with interp.patched_language():
        interp.set_grid(grid)
        for schedule in range(options.schedules):
            _restore(originals)
            origins = itertools.product(*(range(0, n, c) for n, c in zip(grid, dims)))
            for linear, origin in enumerate(origins):
                seed = (options.seed + schedule) * 1_000_003 + linear
                _run_cluster(kernel.__name__, fn, args, origin, dims, num_warps, options, seed, report.errors)
    return report


def cluster_dims(ctas_per_cga, grid: tuple[int, int, int]) -> tuple[int, int, int]:
    """The cluster shape of a launch: (1, 1, 1) without one; each grid dimension must be a multiple."""
    if ctas_per_cga is None:
        return (1, 1, 1)
    from ..errors import TlxLaunchError
    dims = tuple(ctas_per_cga) + (1,) * (3 - len(tuple(ctas_per_cga)))
    if len(dims) != 3 or not all(isinstance(d, int) and d >= 1 for d in dims) or dims[0] * dims[1] * dims[2] > 16:
        raise TlxLaunchError(f"tlx.jit: 'ctas_per_cga' must be up to 3 positive ints with a product of at most 16, "
                             f"got {ctas_per_cga!r}")
    if any(g % d for g, d in zip(grid, dims)):
        raise TlxLaunchError(f"tlx.jit: the grid {grid} must be a multiple of ctas_per_cga {dims} in every dimension")
    return dims


def _grid3(grid) -> tuple[int, int, int]:
    grid = tuple(int(interp.to_int(g)) for g in (grid if isinstance(grid, (tuple, list)) else (grid,)))
    assert 1 <= len(grid) <= 3, f"tlx.sim.launch: grid must have 1 to 3 dimensions, got {grid}"
    return grid + (1,) * (3 - len(grid))


def _run_cluster(kernel_name, fn, args, origin, dims, num_warps, options, seed, errors) -> None:
    """The programs of one cluster (rank = x + dx * (y + dy * z) inside it), interleaved."""
    cluster = ClusterState(dims, seed, options.max_switches)
    for z, y, x in itertools.product(range(dims[2]), range(dims[1]), range(dims[0])):
        pid = (origin[0] + x, origin[1] + y, origin[2] + z)
        program = ProgramState(kernel_name, pid, options, seed, errors, cluster)
        program.trunk = Task(program, None, 0, num_warps, VectorClock())
        cluster.scheduler.spawn(program.trunk, lambda: fn(**args), ())
    interp.set_program_id(cluster.programs[0].pid)
    if cluster.size > 1:                     # the interpreter's program id follows the running task
        cluster.scheduler.on_resume = lambda task: interp.set_program_id(task.program.pid)

    def deadlock_site(live):
        waiting = [t for t in live if t.waiting is not None and t.index is not None] or live
        t = waiting[0]
        return t.waiting.site if t.waiting is not None else Site(kernel_name, t.program.pid, t.index, t.replica)
    try:
        cluster.scheduler.run(deadlock_site)
    except ProtocolError as e:
        if not options.collect_all:
            raise
        errors.append(e)


def _tensor_arguments(bound_args: dict) -> dict:
    """name -> torch tensor of every tensor argument (a descriptor's base, numpy arrays as tensors)."""
    import torch
    out = {}
    for name, v in bound_args.items():
        base = getattr(v, "base", None) if not hasattr(v, "data_ptr") and _is_descriptor(v) else v
        if isinstance(base, np.ndarray):
            base = torch.from_numpy(base)
        if hasattr(base, "untyped_storage"):
            out[name] = base
    return out


def _is_descriptor(v) -> bool:
    return all(hasattr(v, a) for a in ("base", "shape", "strides", "block_shape"))


def _snapshot(bound_args: dict) -> list:
    """Copies of every tensor argument, so each schedule starts from the same memory."""
    out = []
    for v in bound_args.values():
        base = getattr(v, "base", None) if not hasattr(v, "data_ptr") else v
        if hasattr(base, "clone") and hasattr(base, "copy_"):
            out.append((base, base.clone()))
        elif hasattr(base, "copy") and hasattr(base, "__array__"):
            out.append((base, base.copy()))
    return out


def _restore(originals: list) -> None:
    for live, saved in originals:
        if hasattr(live, "copy_"):
            live.copy_(saved)
        else:
            live[...] = saved


# -- turning user code into simulator code ------------------------------------------------------

def kernel_function(kernel, bound_args: dict) -> types.FunctionType:
    """The split kernel instantiated against simulator globals (cached per specialization)."""
    key = ("sim", kernel.constexpr_key(bound_args))
    if key not in kernel.lowered:
        split = kernel.split(bound_args)
        kernel.lowered[key] = _instantiate(kernel.fn, split)
    return kernel.lowered[key]


def _instantiate(fn, split) -> types.FunctionType:
    for gen in [split.kernel, *split.tasks]:
        register_generated(gen.filename, split.source_file)
    scope = {"__builtins__": builtins}
    env = _environment(fn)
    for name in split.global_names:
        if name in env:
            scope[name] = resolve(env[name])
    return split.instantiate(scope)


def _environment(fn) -> dict:
    env = dict(fn.__globals__)
    if fn.__closure__:
        env.update(inspect.getclosurevars(fn).nonlocals)
    return env


def resolve(value):
    """What a name a kernel references means on the simulator."""
    from ..frontend.kernel import TlxKernel
    if value is sys.modules.get("tlx"):
        return sim_tlx_module()
    if isinstance(value, TlxKernel):
        return _nested_kernel(value)
    if isinstance(value, triton.runtime.JITFunction):
        return python_function(value)
    return value


def _nested_kernel(kernel) -> types.FunctionType:
    if id(kernel) not in _HELPERS:
        from ..frontend.split import split_kernel
        _HELPERS[id(kernel)] = _instantiate(kernel.fn, split_kernel(kernel.fn, {}))
    return _HELPERS[id(kernel)]


def python_function(jit_fn) -> types.FunctionType:
    """A @triton.jit helper as a plain function whose globals see the simulator's tlx."""
    fn = jit_fn.fn
    if id(fn) not in _HELPERS:
        names = _code_names(fn.__code__)
        scope = dict(fn.__globals__)
        _HELPERS[id(fn)] = rebuilt = types.FunctionType(fn.__code__, scope, fn.__name__, fn.__defaults__,
                                                        fn.__closure__)
        for name in names & scope.keys():
            scope[name] = resolve(scope[name])
        HELPER_FILES.add(fn.__code__.co_filename)
        rebuilt.__kwdefaults__ = fn.__kwdefaults__
    return _HELPERS[id(fn)]


def _code_names(code) -> set[str]:
    names = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= _code_names(const)
    return names

