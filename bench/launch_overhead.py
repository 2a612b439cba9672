"""Host time per call of a tiny GEMM and a tiny attention (the GPU work is negligible): where tlx's launch
path spends time, beside torch's own ops."""
import time

import torch
from torch.nn.attention import SDPBackend

import bench.attention as bench_attention
from tlx.gluon import launch
from tlx.kernels import attention, gemm


def per_call_us(fn, n=300):
    fn()
    torch.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(n):
        fn()
    elapsed = time.perf_counter() - t
    torch.cuda.synchronize()
    return elapsed / n * 1e6


def main():
    a = torch.randn(256, 256, device="cuda", dtype=torch.float16)
    b = torch.randn(256, 256, device="cuda", dtype=torch.float16)
    c = torch.empty(256, 256, device="cuda", dtype=torch.float16)
    cfg = gemm.Config("persistent", 128, 128, 64, 4)
    kernel = gemm.KERNELS[cfg.kernel]
    args, grid, meta = gemm.launch_args(a, b, c, cfg)
    bound = kernel.bind(args, dict(meta))
    jit_fn = launch.jit_function(kernel, bound)
    conv = launch.convert_args(kernel, bound)
    prepared = kernel.prepare(*args, grid=grid, num_warps=cfg.num_warps, **meta)
    rows = {
        "torch.matmul": lambda: torch.matmul(a, b),
        "gemm.matmul (full tlx path)": lambda: gemm.matmul(a, b, cfg, out=c),
        "gemm.matmul, fresh output": lambda: gemm.matmul(a, b, cfg),
        "PreparedLaunch call alone": prepared,
        "launch_args (descriptors)": lambda: gemm.launch_args(a, b, c, cfg),
        "bind + jit lookup + convert": lambda: launch.convert_args(kernel, kernel.bind(args, dict(meta))),
        "triton JIT run, converted args": lambda: jit_fn.run(*conv, grid=grid, warmup=False, num_warps=4),
    }
    q, k, v = (torch.randn(1, 2, 256, 64, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    cudnn = bench_attention.sdpa(SDPBackend.CUDNN_ATTENTION)
    rows["sdpa, cuDNN backend (1x2x256x64)"] = lambda: cudnn(q, k, v, False)
    rows["attention.attention (same shape)"] = lambda: attention.attention(q, k, v)
    for name, fn in rows.items():
        print(f"{name:34s} {per_call_us(fn):8.1f} us/call")
    import cProfile
    import pstats
    profile = cProfile.Profile()
    profile.enable()
    for _ in range(300):
        gemm.matmul(a, b, cfg, out=c)
    profile.disable()
    torch.cuda.synchronize()
    print("\nwhere gemm.matmul spends its host time (300 calls):")
    pstats.Stats(profile).sort_stats("tottime").print_stats(20)


if __name__ == "__main__":
    main()
