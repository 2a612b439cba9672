"""One attention shape's launches for Nsight Compute: where the default kernel's warps stall, beside
cuDNN's kernels on the same inputs. Run under ncu (bench/gpu_session.sh part `ncu`), which profiles the
launches that its filters pick; run alone, it only launches them.
    PYTHONPATH=. python3 bench/attention_profile.py [--shape 64x1024c] [--launches 2]
A shape is DxS, "c" for causal (B*S = 16384, H*D = 2048, bf16, as in bench/attention.py). The tlx
kernel runs `--launches` times (the first compiles; the part profiles the second), then cuDNN's SDPA
as many times. First run under ncu on 2026-12-06 (bench/results/2026-12-06/ncu-run1-*)."""
from __future__ import annotations

import argparse
import re

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from tlx.kernels import attention


def parse_shape(text: str) -> tuple[int, int, bool]:
    """(D, S, causal) of "DxS" or "DxSc"."""
    m = re.fullmatch(r"(64|128|256)x(\d+)(c?)", text)
    if not m or int(m.group(2)) not in (1024, 2048, 4096, 8192, 16384):
        raise SystemExit(f"attention_profile.py: --shape must be DxS or DxSc with D in 64/128/256 and S in "
                         f"1024..16384 (a power of two), got {text!r}")
    return int(m.group(1)), int(m.group(2)), m.group(3) == "c"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shape", default="64x1024c", help="DxS, with a trailing c for causal")
    ap.add_argument("--launches", type=int, default=2, help="launches of each kernel (the first compiles)")
    args = ap.parse_args()
    if not torch.cuda.is_available():
        raise SystemExit("attention_profile.py: needs a CUDA GPU (it launches kernels for ncu to profile)")
    D, S, causal = parse_shape(args.shape)
    B, H = 16384 // S, 2048 // D
    q, k, v = (torch.randn(B, H, S, D, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    print(f"D={D} S={S} causal={causal}: {attention.default_config(D, S, causal)}", flush=True)
    for _ in range(args.launches):
        attention.attention(q, k, v, causal=causal)
    torch.cuda.synchronize()
    with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
        for _ in range(args.launches):
            F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    torch.cuda.synchronize()


if __name__ == "__main__":
    main()
