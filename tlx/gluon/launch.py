"""Compile and launch a TlxKernel through Gluon: split per constexpr specialization, convert host
descriptors (their layout chosen here, after any autotuner pre-hook set the block shape)."""
from __future__ import annotations

import contextlib
import os
import sys
import tempfile

from triton.experimental.gluon import language as gl

from triton.compiler.errors import CompilationError

from ..errors import TlxLaunchError, raise_user_error
from ..frontend.descriptors import is_host_descriptor
from . import barrier_elision, layouts
from ._triton_compat import GluonHostTensorDescriptor, install_codegen_hook
from .scope import instantiate, resolve
from .prepared import PreparedLaunch
from .semantic import LAYOUT_POLICIES, TlxCodeGenerator, TlxSemantic

install_codegen_hook(TlxSemantic, TlxCodeGenerator)

_TORCH_TO_GL = {
    "float16": gl.float16, "bfloat16": gl.bfloat16, "float32": gl.float32, "float64": gl.float64,
    "int8": gl.int8, "int16": gl.int16, "int32": gl.int32, "int64": gl.int64, "uint8": gl.uint8,
    "float8_e4m3fn": gl.float8e4nv, "float8_e5m2": gl.float8e5, "bool": gl.int1,
}


def gl_dtype(torch_dtype) -> gl.dtype:
    name = str(torch_dtype).replace("torch.", "")
    if name not in _TORCH_TO_GL:
        raise TlxLaunchError(f"tlx: tensors of dtype {torch_dtype} are not supported as descriptor bases")
    return _TORCH_TO_GL[name]


def to_gluon_descriptor(desc) -> GluonHostTensorDescriptor:
    """The Gluon descriptor (with its chosen layout) of a host descriptor, memoised on the descriptor:
    the key covers every field, so a pre-hook that changes the block shape gets a fresh one."""
    key = (desc.base.data_ptr(), tuple(desc.shape), tuple(desc.strides), tuple(desc.block_shape),
           getattr(desc, "padding", "zero"))
    memo = getattr(desc, "_tlx_gluon", None)
    if memo is not None and memo[0] == key:
        return memo[1]
    block = [int(b) for b in desc.block_shape]
    layout = layouts.shared_for(block, gl_dtype(desc.base.dtype))
    converted = GluonHostTensorDescriptor(desc.base, list(desc.shape), list(desc.strides), block, layout,
                                          getattr(desc, "padding", "zero"))
    desc._tlx_gluon = (key, converted)
    return converted


def jit_function(kernel, bound: dict, layout_policy: int | None = None, spec: tuple | None = None):
    """The GluonJITFunction of one constexpr specialization and layout policy (an index in
    semantic.LAYOUT_POLICIES; memoised on the kernel); by default the policy that compiled last time."""
    spec = kernel.constexpr_key(bound) if spec is None else spec
    if layout_policy is None:
        layout_policy = kernel.lowered.get(("gluon-policy", spec), 0)
    key = ("gluon", spec, layout_policy)
    if key not in kernel.lowered:
        kernel.lowered[key] = instantiate(kernel.split(bound), kernel.fn, layout_policy)
    return kernel.lowered[key]


def with_layout_retry(kernel, bound: dict, attempt):
    """`attempt(jit_fn)` under each layout policy in turn (semantic.LAYOUT_POLICIES) while Gluon's layout
    resolution fails; the last one's error is the user's. The policy that worked is remembered."""
    spec = kernel.constexpr_key(bound)
    attempt = barrier_elision.with_pass(attempt)
    if ("gluon-policy", spec) in kernel.lowered:
        return attempt(jit_function(kernel, bound, spec=spec))
    last = len(LAYOUT_POLICIES) - 1
    for policy in range(last):
        captured = []
        try:
            with captured_stderr(captured):
                result = attempt(jit_function(kernel, bound, policy, spec))
            kernel.lowered[("gluon-policy", spec)] = policy
            return result
        except RuntimeError as e:
            if "PassManager::run failed" not in str(e):
                sys.stderr.write("".join(captured))   # not a layout failure: show its diagnostics
                raise
    result = attempt(jit_function(kernel, bound, last, spec))
    kernel.lowered[("gluon-policy", spec)] = last
    return result


@contextlib.contextmanager
def captured_stderr(out: list):
    """Hold back MLIR's diagnostics (written to fd 2) during a compile attempt that may be retried;
    the text is appended to `out`."""
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile(mode="w+") as tmp:
        os.dup2(tmp.fileno(), 2)
        try:
            yield
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            tmp.seek(0)
            out.append(tmp.read())


def convert_args(kernel, bound: dict) -> list:
    """Launch arguments as Gluon takes them: host descriptors with their layout, and @tlx.jit / @triton.jit
    functions passed as constexprs (e.g. an attention score_mod) as the Gluon functions they lower to."""
    return [to_gluon_descriptor(v) if is_host_descriptor(v) else
            resolve(v) if name in kernel.constexpr_names and callable(v) else v for name, v in bound.items()]


def run(kernel, bound: dict, grid, warmup: bool, num_warps: int, num_stages=None, args: list | None = None):
    args = convert_args(kernel, bound) if args is None else args
    options = {"num_warps": num_warps}
    if num_stages is not None:
        options["num_stages"] = num_stages
    if callable(grid):
        user_grid = grid
        grid = lambda meta: user_grid(bound)   # noqa: E731  (the user's grid sees tlx's bound args)
    try:
        return with_layout_retry(kernel, bound, lambda jit_fn: jit_fn.run(*args, grid=grid, warmup=warmup,
                                                                          **options))
    except CompilationError as e:
        raise_user_error(e)


def prepare(kernel, bound: dict, grid, num_warps: int, num_stages=None, ctas_per_cga=None) -> PreparedLaunch:
    """Compile (if needed) and return the launch with these exact arguments, ready to repeat cheaply.
    `ctas_per_cga` (n, 1, 1): the kernel, compiled for one CTA, starts in clusters of n (Triton's launcher
    takes the cluster size from the packed metadata; docs/cluster_feasibility.md)."""
    args = convert_args(kernel, bound)
    grid = tuple(grid(bound)) if callable(grid) else tuple(grid)
    compiled = run(kernel, bound, grid, warmup=True, num_warps=num_warps, num_stages=num_stages, args=args)
    return PreparedLaunch(compiled, grid, args, cluster=ctas_per_cga[0] if ctas_per_cga else 1)
