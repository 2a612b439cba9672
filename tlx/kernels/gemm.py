"""Hopper GEMM written in the TLX surface: C[M, N] = A[M, K] @ B[K, N] (fp16/bf16 in, fp32 accumulate).

Two kernels share the host wrapper:
- `matmul_ws_kernel`: warp-specialized. The default task is the TMA producer; two consumer warp
  groups (one task replicated twice, 232 registers each) each own half of the M tile, keep one
  wgmma in flight and release a stage as soon as the wgmma that read it has retired.
- `matmul_pipelined_kernel`: no warp specialization; a STAGES-deep TMA ring issued ahead of the
  wgmma loop (the software pipeline Triton builds, written out by hand).
"""
from __future__ import annotations

from dataclasses import dataclass

import triton
import triton.language as tl

import tlx
from tlx.errors import ConfigRejected


@tlx.jit
def grouped_tile(pid, M, N, BM: tl.constexpr, BN: tl.constexpr, GROUP_M: tl.constexpr):
    """Tile (m, n) of program `pid` in grouped order: GROUP_M row-tiles share their B columns in L2."""
    num_pid_m = tl.cdiv(M, BM)
    num_pid_n = tl.cdiv(N, BN)
    in_group = GROUP_M * num_pid_n
    first_m = (pid // in_group) * GROUP_M
    group_size = tl.minimum(num_pid_m - first_m, GROUP_M)
    pid_m = first_m + (pid % in_group) % group_size
    pid_n = (pid % in_group) // group_size
    return pid_m * BM, pid_n * BN


@tlx.jit
def matmul_ws_kernel(a_desc, b_desc, c_desc, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
                     STAGES: tl.constexpr, GROUP_M: tl.constexpr):
    off_m, off_n = grouped_tile(tl.program_id(0), M, N, BM, BN, GROUP_M)
    dtype = tlx.dtype_of(a_desc)
    c_dtype = tlx.dtype_of(c_desc)
    HALF: tl.constexpr = BM // 2
    a_bufs = tlx.local_alloc((HALF, BK), dtype, 2 * STAGES)     # slot s + STAGES * half
    b_bufs = tlx.local_alloc((BK, BN), dtype, STAGES)
    c_bufs = tlx.local_alloc((HALF, BN), c_dtype, 2)
    full_a = tlx.alloc_barriers(2 * STAGES)
    full_b = tlx.alloc_barriers(STAGES)
    empty_a = tlx.alloc_barriers(2 * STAGES)
    empty_b = tlx.alloc_barriers(STAGES, arrive_count=2)         # both consumers read each B tile
    k_tiles = tl.cdiv(K, BK)
    with tlx.async_tasks():
        with tlx.async_task("default"):                          # producer: TMA loads
            for k in range(k_tiles):
                s, p = tlx.warp_spec.get_bufidx_phase(k, STAGES)
                for h in tl.static_range(2):
                    tlx.barrier_wait(empty_a[s + STAGES * h], p ^ 1)
                    tlx.barrier_expect_bytes(full_a[s + STAGES * h], HALF * BK * tlx.size_of(dtype))
                    tlx.async_descriptor_load(a_desc, a_bufs[s + STAGES * h], [off_m + h * HALF, k * BK],
                                              full_a[s + STAGES * h])
                tlx.barrier_wait(empty_b[s], p ^ 1)
                tlx.barrier_expect_bytes(full_b[s], BK * BN * tlx.size_of(dtype))
                tlx.async_descriptor_load(b_desc, b_bufs[s], [k * BK, off_n], full_b[s])
        with tlx.async_task(num_warps=4, registers=232, replicate=2):   # consumers: wgmma
            cid = tlx.async_task_replica_id()
            acc = tl.zeros((HALF, BN), dtype=tl.float32)
            for k in range(k_tiles):
                s, p = tlx.warp_spec.get_bufidx_phase(k, STAGES)
                tlx.barrier_wait(full_a[s + STAGES * cid], p)
                tlx.barrier_wait(full_b[s], p)
                acc = tlx.async_dot(a_bufs[s + STAGES * cid], b_bufs[s], acc)
                acc = tlx.async_dot_wait(1, acc)                 # the previous wgmma has retired:
                if k > 0:                                        # release the stage it read
                    prev = (k - 1) % STAGES
                    tlx.barrier_arrive(empty_a[prev + STAGES * cid])
                    tlx.barrier_arrive(empty_b[prev])
            acc = tlx.async_dot_wait(0, acc)
            last = (k_tiles - 1) % STAGES
            tlx.barrier_arrive(empty_a[last + STAGES * cid])
            tlx.barrier_arrive(empty_b[last])
            tlx.local_store(c_bufs[cid], acc.to(c_dtype))
            tlx.fence_async_shared()
            tlx.async_descriptor_store(c_desc, c_bufs[cid], [off_m + cid * HALF, off_n])
            tlx.async_descriptor_store_wait(0)


@tlx.jit
def matmul_pipelined_kernel(a_desc, b_desc, c_desc, M, N, K, BM: tl.constexpr, BN: tl.constexpr,
                            BK: tl.constexpr, STAGES: tl.constexpr, GROUP_M: tl.constexpr):
    off_m, off_n = grouped_tile(tl.program_id(0), M, N, BM, BN, GROUP_M)
    dtype = tlx.dtype_of(a_desc)
    c_dtype = tlx.dtype_of(c_desc)
    a_bufs = tlx.local_alloc((BM, BK), dtype, STAGES)
    b_bufs = tlx.local_alloc((BK, BN), dtype, STAGES)
    c_buf = tlx.local_alloc((BM, BN), c_dtype, 1)
    full = tlx.alloc_barriers(STAGES)
    k_tiles = tl.cdiv(K, BK)
    NBYTES: tl.constexpr = (BM * BK + BK * BN) * tlx.size_of(dtype)
    for i in tl.static_range(STAGES - 1):                        # prologue: fill STAGES-1 slots
        tlx.barrier_expect_bytes(full[i], NBYTES, pred=i < k_tiles)
        tlx.async_descriptor_load(a_desc, a_bufs[i], [off_m, i * BK], full[i], pred=i < k_tiles)
        tlx.async_descriptor_load(b_desc, b_bufs[i], [i * BK, off_n], full[i], pred=i < k_tiles)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(k_tiles):
        s, p = tlx.warp_spec.get_bufidx_phase(k, STAGES)
        tlx.barrier_wait(full[s], p)
        acc = tlx.async_dot(a_bufs[s], b_bufs[s], acc)
        acc = tlx.async_dot_wait(1, acc)                         # wgmma k-1 retired: its slot is free
        nk = k + STAGES - 1
        ns = nk % STAGES
        tlx.barrier_expect_bytes(full[ns], NBYTES, pred=nk < k_tiles)
        tlx.async_descriptor_load(a_desc, a_bufs[ns], [off_m, nk * BK], full[ns], pred=nk < k_tiles)
        tlx.async_descriptor_load(b_desc, b_bufs[ns], [nk * BK, off_n], full[ns], pred=nk < k_tiles)
    acc = tlx.async_dot_wait(0, acc)
    tlx.local_store(c_buf[0], acc.to(c_dtype))
    tlx.fence_async_shared()
    tlx.async_descriptor_store(c_desc, c_buf[0], [off_m, off_n])
    tlx.async_descriptor_store_wait(0)


@dataclass(frozen=True)
class Config:
    """One GEMM configuration. `kernel` is "ws" or "pipelined"."""
    kernel: str = "ws"
    BM: int = 128
    BN: int = 256
    BK: int = 64
    STAGES: int = 3
    GROUP_M: int = 8
    num_warps: int = 4

    def __post_init__(self):
        if self.kernel not in KERNELS:
            raise ConfigRejected(f"gemm.Config: 'kernel' must be one of {sorted(KERNELS)}, got {self.kernel!r}")
        if self.kernel == "ws" and self.BM % 128:
            raise ConfigRejected(f"gemm.Config: 'BM' must be a multiple of 128 for 'ws' (two 64-row consumers), "
                                 f"got {self.BM}")

    def key(self) -> tuple:
        return (self.kernel, self.BM, self.BN, self.BK, self.STAGES, self.GROUP_M, self.num_warps)


KERNELS = {"ws": matmul_ws_kernel, "pipelined": matmul_pipelined_kernel}
SUPPORTED = ("float16", "bfloat16")


def configs() -> list[Config]:
    """Candidate configurations for the tuner."""
    return [Config("ws", 128, 256, 64, 3), Config("ws", 128, 128, 64, 4), Config("pipelined", 128, 256, 64, 3, 8, 8),
            Config("pipelined", 128, 128, 64, 4, 8, 4)]


def check_operands(a, b, out_dtype=None) -> None:
    if a.dim() != 2 or b.dim() != 2:
        raise ValueError(f"tlx.matmul: 'a' and 'b' must be 2-D, got shapes {tuple(a.shape)} and {tuple(b.shape)}")
    if a.shape[1] != b.shape[0]:
        raise ValueError(f"tlx.matmul: inner sizes must match, got a {tuple(a.shape)} and b {tuple(b.shape)}")
    if a.dtype != b.dtype or str(a.dtype).replace("torch.", "") not in SUPPORTED:
        raise ValueError(f"tlx.matmul: 'a' and 'b' must both be float16 or bfloat16, got {a.dtype} and {b.dtype}")
    if a.device != b.device:
        raise ValueError(f"tlx.matmul: 'a' and 'b' must be on one device, got {a.device} and {b.device}")
    for name, t in (("a", a), ("b", b)):
        if t.stride(1) != 1 or (t.stride(0) * t.element_size()) % 16 or t.data_ptr() % 16:
            raise ValueError(f"tlx.matmul: '{name}' must be row-major with a 16-byte aligned row pitch for TMA, "
                             f"got strides {t.stride()} ({t.dtype}); call .contiguous() on a padded copy")


def launch_args(a, b, c, cfg: Config):
    """Descriptors, grid and constexprs of one launch (the simulator and the GPU share them)."""
    M, K = a.shape
    N = b.shape[1]
    rows = cfg.BM // 2 if cfg.kernel == "ws" else cfg.BM
    a_desc = tlx.TensorDescriptor.from_tensor(a, [rows, cfg.BK])
    b_desc = tlx.TensorDescriptor.from_tensor(b, [cfg.BK, cfg.BN])
    c_desc = tlx.TensorDescriptor.from_tensor(c, [rows, cfg.BN])
    grid = (triton.cdiv(M, cfg.BM) * triton.cdiv(N, cfg.BN),)
    meta = dict(BM=cfg.BM, BN=cfg.BN, BK=cfg.BK, STAGES=cfg.STAGES, GROUP_M=cfg.GROUP_M)
    return (a_desc, b_desc, c_desc, M, N, K), grid, meta


def matmul(a, b, config: Config | None = None, out=None, backend: str | None = None):
    """C = A @ B with a tlx kernel. `backend="sim"` runs it on the CPU simulator."""
    import torch
    check_operands(a, b)
    cfg = config or Config()
    c = out if out is not None else torch.empty((a.shape[0], b.shape[1]), dtype=a.dtype, device=a.device)
    args, grid, meta = launch_args(a, b, c, cfg)
    KERNELS[cfg.kernel][grid](*args, num_warps=cfg.num_warps, backend=backend, **meta)
    return c
