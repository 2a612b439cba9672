"""A launch prepared ahead: compile once, expand the TMA descriptors once, then each call is one C call.

Triton's `JITFunction.run` binds and specializes every argument, hashes a cache key and rebuilds every
TMA descriptor (a driver call each) on every launch: ~30 us of host time, which dominates a small GEMM.
A `PreparedLaunch` does that work once for fixed arguments. It keeps no tensor alive: descriptors
become CUtensorMaps (which hold addresses, not tensors) and pointer arguments become integers, so a
caller that keys prepared launches by (pointer, shape, strides, dtype) reuses one exactly when the
same launch would be built again (see tlx/kernels/launch_cache.py).

It relies on two facts of Triton 3.6's CUDA launcher (triton/backends/nvidia/driver.py), checked at
preparation: `CudaLauncher.launch` is either the compiled `launch` or a closure `inner` over it
(`launcher`) that expands descriptors with `make_tensordesc_arg`; the compiled `launch` takes
(grid x3, stream, function, cooperative, pdl, global scratch, profile scratch, packed metadata,
launch metadata, enter hook, exit hook, *args). Where either does not hold, or the kernel needs
scratch memory, the launch goes through `CudaLauncher.__call__` with the original arguments instead
(correct, only slower)."""
from __future__ import annotations

from triton import knobs
from triton.runtime.driver import driver


def _closure(fn) -> dict:
    code = getattr(fn, "__code__", None)
    if code is None or not fn.__closure__:
        return {}
    return {name: cell.cell_contents for name, cell in zip(code.co_freevars, fn.__closure__)}


def _raw_launch(launcher):
    """(compiled launch function, descriptor indices, descriptor metadata) or None if unrecognised."""
    launch = getattr(launcher, "launch", None)
    if launch is None:
        return None
    if not hasattr(launch, "__code__"):               # no descriptor arguments: already the C function
        return launch, frozenset(), []
    cells = _closure(launch)
    if not {"launcher", "tensordesc_indices", "tensordesc_meta"} <= cells.keys():
        return None
    return cells["launcher"], frozenset(cells["tensordesc_indices"]), list(cells["tensordesc_meta"])


def _address(arg):
    return arg.data_ptr() if hasattr(arg, "data_ptr") else arg


def _installed(hook):
    """The hook, or None when nothing is installed (Triton 3.6 keeps an empty HookChain, which the
    launcher would call for nothing on every launch)."""
    return None if hook is None or not getattr(hook, "calls", True) else hook


class PreparedLaunch:
    """`prepared()` launches the compiled kernel on the current stream with the prepared arguments."""

    max_active_clusters = None      # clustered launches: the driver's count of co-resident clusters

    def __init__(self, compiled, grid: tuple, args: list, cluster: int = 1):
        if hasattr(compiled, "result"):                # an asynchronous compile
            compiled = compiled.result()
        self.compiled = compiled
        self.grid = tuple(int(g) for g in grid) + (1,) * (3 - len(grid))
        launcher = compiled.run                        # loads the binary, builds the CudaLauncher
        self.function = compiled.function
        self.packed_metadata = compiled.packed_metadata
        if cluster > 1:          # the launcher starts grid x `cluster` CTAs in clusters of (cluster, 1, 1)
            if self.grid[0] % cluster:
                from ..errors import TlxLaunchError
                raise TlxLaunchError(f"tlx.jit: the grid {self.grid} must be a multiple of the cluster ({cluster}, 1, 1)")
            num_warps, _, shared = self.packed_metadata
            self.packed_metadata = (num_warps, cluster, shared)
            self.grid = (self.grid[0] // cluster, *self.grid[1:])
            # How many clusters of this kernel the GPU runs at once: a cluster's CTAs share one GPC, so on
            # GPCs with an odd count of free SMs a pair fits fewer times than SMs // cluster. A persistent
            # kernel sized past this would leave its last clusters waiting for a whole program's time.
            self.max_active_clusters = driver.active.utils.cuOccupancyMaxActiveClusters(
                self.function, shared, cluster)
        raw = _raw_launch(launcher)
        needs_scratch = getattr(launcher, "global_scratch_size", 0) > 0 or \
            getattr(launcher, "profile_scratch_size", 0) > 0
        if raw is None or needs_scratch:
            self._launch, self._args = launcher, list(args)   # CudaLauncher.__call__: expands per call
            self._head = ()
            self.fast = False
            return
        from triton.backends.nvidia.driver import make_tensordesc_arg
        raw_launch, desc_indices, desc_meta = raw
        pointer_indices = {i for i, sig in enumerate(compiled.src.signature.values())
                           if isinstance(sig, str) and sig.startswith("*")}
        expanded, d = [], 0
        for i, arg in enumerate(args):
            if i in desc_indices:                      # a CUtensorMap (or, unlowered, a base pointer), shape, strides
                parts = make_tensordesc_arg(arg, desc_meta[d] if desc_meta else None)
                expanded.extend(_address(p) for p in parts)
                d += 1
            elif i in pointer_indices:
                expanded.append(_address(arg))
            else:
                expanded.append(arg)
        self._launch, self._args = raw_launch, expanded
        self._head = (launcher.launch_cooperative_grid, launcher.launch_pdl, None, None)
        self.fast = True

    def __call__(self):
        device = driver.active.get_current_device()
        stream = driver.active.get_current_stream(device)
        enter, exit_ = _installed(knobs.runtime.launch_enter_hook), _installed(knobs.runtime.launch_exit_hook)
        meta = self.compiled.launch_metadata(self.grid, stream) if enter or exit_ else None
        gx, gy, gz = self.grid
        self._launch(gx, gy, gz, stream, self.function, *self._head, self.packed_metadata, meta, enter, exit_,
                     *self._args)
