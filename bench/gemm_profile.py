"""One GEMM shape's launches for Nsight Compute: the default tlx kernel, then cuBLAS (torch.matmul) on the same
inputs. Run under ncu (bench/gpu_session.sh part `ncu` with PROFILE=gemm; NCU_KERNEL=matmul picks ours,
NCU_KERNEL=nvjet cuBLAS's); run alone, it only launches them.
    PYTHONPATH=. python3 bench/gemm_profile.py [--shape 4096x4096x4096] [--dtype bfloat16] [--launches 2]
The tlx kernel runs `--launches` times (the first compiles; the part profiles the second), then torch.matmul
as many times."""
from __future__ import annotations

import argparse
import re

import torch

from tlx.kernels import gemm


def parse_shape(text: str) -> tuple[int, int, int]:
    """(M, N, K) of "MxNxK"."""
    m = re.fullmatch(r"(\d+)x(\d+)x(\d+)", text)
    if not m or min(int(g) for g in m.groups()) < 16:
        raise SystemExit(f"gemm_profile.py: --shape must be MxNxK with each size at least 16, got {text!r}")
    return int(m.group(1)), int(m.group(2)), int(m.group(3))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shape", default="4096x4096x4096", help="MxNxK")
    ap.add_argument("--dtype", default="bfloat16", choices=["bfloat16", "float16"])
    ap.add_argument("--launches", type=int, default=2, help="launches of each kernel (the first compiles)")
    args = ap.parse_args()
    M, N, K = parse_shape(args.shape)
    if not torch.cuda.is_available():
        raise SystemExit("gemm_profile.py: needs a CUDA GPU (it launches kernels for ncu to profile)")
    dtype = getattr(torch, args.dtype)
    a, b = torch.randn(M, K, device="cuda", dtype=dtype), torch.randn(K, N, device="cuda", dtype=dtype)
    print(f"{M}x{N}x{K} {args.dtype}: {gemm.default_config(M, N, K, a.element_size(), a.element_size())}", flush=True)
    for _ in range(args.launches):
        gemm.matmul(a, b)
    torch.cuda.synchronize()
    for _ in range(args.launches):
        torch.matmul(a, b)
    torch.cuda.synchronize()


if __name__ == "__main__":
    main()
