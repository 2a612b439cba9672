"""`tlx.compile`: compile a kernel for a target with no GPU and report what the binary contains."""
from __future__ import annotations

import os
import re
import subprocess
import tempfile
from dataclasses import dataclass, field

import triton
from triton.backends.compiler import BaseBackend, GPUTarget
from triton.runtime.jit import mangle_type

from triton.compiler.errors import CompilationError

from ..errors import TlxCompileError, TlxLaunchError, raise_user_error
from ._triton_compat import GluonASTSource
from .launch import convert_args, with_layout_retry
from .sass import disassemble, unset_wgmma_descriptors

TARGETS = {"sm_90a": GPUTarget("cuda", 90, 32), "sm_90": GPUTarget("cuda", 90, 32),
           "sm_100a": GPUTarget("cuda", 100, 32)}
SHARED_LIMIT = {"sm_90a": 232448, "sm_90": 232448, "sm_100a": 232448}   # bytes per block (opt-in maximum)

PTX_COUNTS = {
    "wgmma": r"wgmma\.mma_async",
    "tma_load": r"cp\.async\.bulk\.tensor\.\dd\.shared::cluster\.global",
    "tma_store": r"cp\.async\.bulk\.tensor\.\dd\.global\.shared::cta",
    "mbarrier_wait": r"mbarrier\.try_wait",
    "mbarrier_arrive": r"mbarrier\.arrive",
    "setmaxnreg": r"setmaxnreg",
    "named_barrier": r"\bbar(?:rier)?\.(?:sync|arrive)(?:\.aligned)?\s+(?:[1-9]|1[0-5])\s*,",
    "cp_async": r"cp\.async\.(?:ca|cg)\.shared",
    "mma_sync": r"\bmma\.sync",
    # clusters (tlx/gluon/cluster_ptx.py): TMA loads into every CTA of a mask, arrives on another CTA's
    # mbarrier (after its `mapa` address), cluster-wide barriers
    "multicast_load": r"cp\.async\.bulk\.tensor\.\dd\.[^;]*\.multicast::cluster",
    "remote_arrive": r"mbarrier\.arrive\.shared::cluster",
    "cluster_barrier": r"barrier\.cluster\.arrive",
}


@dataclass
class CompileReport:
    name: str
    target: str
    asm: dict = field(repr=False)
    stats: dict = field(default_factory=dict)

    def __str__(self) -> str:
        body = "  ".join(f"{k}={v}" for k, v in self.stats.items())
        return f"{self.name} [{self.target}]  {body}"


def ptx_stats(ptx: str) -> dict:
    return {k: len(re.findall(p, ptx)) for k, p in PTX_COUNTS.items()}


def ptxas_stats(ptx: str, arch: str) -> dict:
    """Registers, spills and wgmma serialization as ptxas reports them (the compiler inside the triton
    wheel). `wgmma_serialized`: ptxas warning C7514, it ran every wgmma of the kernel one at a time
    (e.g. a non-wgmma instruction touched an accumulator while its wgmma could still be in flight)."""
    from triton.backends.nvidia.compiler import get_ptxas
    ptxas = get_ptxas(int(re.sub(r"\D", "", arch))).path
    with tempfile.TemporaryDirectory() as tmp:
        src = os.path.join(tmp, "k.ptx")
        with open(src, "w") as f:
            f.write(ptx)
        out = subprocess.run([ptxas, f"-arch={arch}", "-v", src, "-o", os.path.join(tmp, "k.cubin")],
                             capture_output=True, text=True)
    log = out.stdout + out.stderr
    regs = [int(x) for x in re.findall(r"Used (\d+) registers", log)]
    spill_st = [int(x) for x in re.findall(r"(\d+) bytes spill stores", log)]
    spill_ld = [int(x) for x in re.findall(r"(\d+) bytes spill loads", log)]
    return {"registers": max(regs, default=0), "spills": sum(spill_st) + sum(spill_ld),
            "wgmma_serialized": int("C7514" in log or "wgmma.mma_async instructions are serialized" in log)}


def wgmma_desc_unset(cubin: bytes) -> int:
    """HGMMAs whose descriptor registers some path leaves unset (a ptxas 12.8 miscompile,
    tlx/gluon/sass.py); -1 when the binary could not be disassembled, so a check of 0 fails loudly."""
    try:
        return len(unset_wgmma_descriptors(disassemble(cubin)))
    except (OSError, subprocess.CalledProcessError):
        return -1


def signature_of(kernel, bound: dict, args: list) -> tuple[dict, dict, dict]:
    signature, constexprs, attrs = {}, {}, {}
    for i, (name, value) in enumerate(zip(bound, args)):
        if name in kernel.constexpr_names:
            signature[name] = "constexpr"
            constexprs[name] = getattr(value, "value", value)
            continue
        if value is None:
            signature[name] = "constexpr"
            constexprs[name] = None
            continue
        signature[name] = mangle_type(value)
        spec = BaseBackend.get_int_specialization(value, align=True) if isinstance(value, int) and \
            not isinstance(value, bool) else ""
        if hasattr(value, "data_ptr") and value.data_ptr() % 16 == 0:
            spec = "D"
        if spec:
            attrs[(i,)] = BaseBackend.parse_attr(spec)
    return signature, constexprs, attrs


def compile(kernel, *args, target: str = "sm_90a", num_warps: int = 4, num_stages: int = 3, **kwargs) -> CompileReport:
    """Compile `kernel` for `target` exactly as a launch with these arguments would, without a GPU.

    Arguments may be CPU tensors, host tensor descriptors over CPU tensors, or scalars."""
    if target not in TARGETS:
        raise TlxLaunchError(f"tlx.compile: 'target' must be one of {sorted(TARGETS)}, got {target!r}")
    # launch options (ctas_per_cga) are checked as a launch checks them, then dropped: a kernel compiles for
    # one CTA and its launch starts it in clusters (launch.prepare)
    _, bound = kernel.bind_launch(args, kwargs, "gluon")
    conv = convert_args(kernel, bound)
    signature, constexprs, attrs = signature_of(kernel, bound, conv)
    options = {"num_warps": num_warps, "num_stages": num_stages}

    def attempt(jit_fn):
        return triton.compile(GluonASTSource(jit_fn, signature, constexprs, attrs), target=TARGETS[target],
                              options=options)
    try:
        compiled = with_layout_retry(kernel, bound, attempt)
    except CompilationError as e:
        raise_user_error(e)
    asm = dict(compiled.asm)
    stats = ptx_stats(asm["ptx"])
    stats["shared_bytes"] = int(compiled.metadata.shared)
    stats.update(ptxas_stats(asm["ptx"], target))
    stats["wgmma_desc_unset"] = wgmma_desc_unset(asm["cubin"])
    limit = SHARED_LIMIT[target]
    if stats["shared_bytes"] > limit:
        raise TlxCompileError(f"tlx.local_alloc: kernel '{kernel.__name__}' needs {stats['shared_bytes']} bytes of "
                              f"shared memory, {target} has {limit} available per block (fewer buffers or smaller "
                              "tiles)")
    return CompileReport(kernel.__name__, target, asm, stats)


__all__ = ["compile", "CompileReport"]
