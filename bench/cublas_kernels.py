"""Which cuBLAS kernel torch.matmul runs for each GEMM benchmark shape, read off the profiler.

cuBLAS's Hopper kernel names carry the tile, the stages and, by their convention, the cluster shape
(`nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_NNT` on an H100, 2026-12-06): knowing them says what our
kernels are measured against
(docs/design.md, "Clusters and TMA multicast"). Writes one JSON row per shape and dtype.

    PYTHONPATH=. python3 bench/cublas_kernels.py --out cublas_kernels.json
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile

import torch
from torch.profiler import ProfilerActivity, profile

from bench.gemm import SHAPES

# Fields that kineto records for each kernel launch in its trace (others are left out).
LAUNCH_FIELDS = ("grid", "block", "registers per thread", "shared memory", "blocks per SM", "est. achieved occupancy %")


def kernels_of(fn, repeats: int = 3) -> list[dict]:
    """The distinct kernels `fn` launches on the GPU, with their launch geometry from the trace."""
    fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(repeats):
            fn()
        torch.cuda.synchronize()
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "trace.json")
        prof.export_chrome_trace(path)
        with open(path) as f:
            events = json.load(f).get("traceEvents", [])
    seen = {}
    for ev in events:
        if ev.get("cat") != "kernel":
            continue
        args = ev.get("args", {})
        entry = seen.setdefault(ev["name"], {"name": ev["name"], "launches": 0, "us": [],
                                             **{k: args[k] for k in LAUNCH_FIELDS if k in args}})
        entry["launches"] += 1
        entry["us"].append(ev.get("dur"))
    return list(seen.values())


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="bench/results/cublas_kernels.json")
    ap.add_argument("--dtypes", default="bfloat16,float16")
    args = ap.parse_args()
    rows = []
    for dtype_name in args.dtypes.split(","):
        dtype = getattr(torch, dtype_name)
        for m, n, k in SHAPES:
            a = torch.randn(m, k, device="cuda", dtype=dtype)
            b = torch.randn(k, n, device="cuda", dtype=dtype)
            kernels = kernels_of(lambda: torch.matmul(a, b))
            rows.append({"shape": [m, n, k], "dtype": dtype_name, "kernels": kernels})
            names = "; ".join(f"{kern['name'][:110]} grid={kern.get('grid')}" for kern in kernels)
            print(f"{dtype_name:9s} {m}x{n}x{k}: {names}", flush=True)
    meta = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__,
            "cublas": torch.backends.cuda.preferred_blas_library().name if hasattr(torch.backends.cuda, "preferred_blas_library") else None}
    with open(args.out, "w") as f:
        json.dump({"meta": meta, "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
