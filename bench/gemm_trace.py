"""Where a persistent GEMM's time goes: the kernel's TRACE stamps (the GPU's nanosecond timer, one time
base for all SMs) turned into a per-phase summary and a Chrome trace (open it in ui.perfetto.dev or
chrome://tracing: a process per program, a thread per consumer warp group).
    PYTHONPATH=. python3 bench/gemm_trace.py --out DIR [--shapes 4096x4096x4096,4096x4096x512] [--dtype bfloat16]
Each shape runs the persistent 128x256 g16 NO_ZERO_FILL kernel with and without STREAM_K, three
stamped launches each (compile, warm-up), the last checked against torch and kept. Phases per consumer: its data-parallel tiles, and
per stream-K segment: the wait for the previous program's partial, the K steps, the store or the
partial's hand-off (until the next segment or the end)."""
from __future__ import annotations

import argparse
import json
import os
import statistics

from tlx.kernels import gemm


def earliest(stamps: list) -> int:
    """The first stamp of a [programs][2][TRACE_SLOTS] list (-1 = never stamped): the timeline's zero."""
    return min(v for prog in stamps for cons in prog for v in cons if v >= 0)


def phases(trace) -> list[dict]:
    """Chrome-trace complete events ("ph": "X", microseconds from the earliest stamp) from a
    [programs, 2, TRACE_SLOTS] int64 stamp tensor (-1 = never stamped)."""
    t = trace.tolist()
    t0 = earliest(t)
    events = []

    def add(name, pid, tid, start, end):
        if start >= 0 and end >= start:
            events.append({"name": name, "ph": "X", "pid": pid, "tid": tid, "ts": (start - t0) / 1e3,
                           "dur": (end - start) / 1e3})

    last = gemm.TRACE_SLOTS - 1
    for pid, prog in enumerate(t):
        for tid, s in enumerate(prog):
            add("data-parallel tiles", pid, tid, s[0], s[1])
            seg_starts = [s[2 + 3 * i] for i in range(4) if s[2 + 3 * i] >= 0]
            for i in range(len(seg_starts)):
                start, taken, done = s[2 + 3 * i], s[3 + 3 * i], s[4 + 3 * i]
                following = seg_starts[i + 1] if i + 1 < len(seg_starts) else s[last]
                add(f"segment {i}: wait for partial", pid, tid, start, taken)
                add(f"segment {i}: K steps", pid, tid, taken, done)
                add(f"segment {i}: store / hand-off", pid, tid, done, following)
    return events


def summary(trace) -> dict:
    """Microseconds: the kernel's span, each phase's median and max over consumers, how far apart the
    consumers start (launch skew) and finish (the tail stream-K is meant to remove)."""
    events = phases(trace)
    by_name: dict[str, list[float]] = {}
    for e in events:
        by_name.setdefault(e["name"], []).append(e["dur"])
    t = trace.tolist()
    t0 = earliest(t)
    ends = [(cons[-1] - t0) / 1e3 for prog in t for cons in prog if cons[-1] >= 0]
    starts = [(cons[0] - t0) / 1e3 for prog in t for cons in prog if cons[0] >= 0]
    return {"span_us": max(ends), "end_spread_us": max(ends) - min(ends), "start_spread_us": max(starts),
            "phases_us": {n: {"median": statistics.median(d), "max": max(d), "count": len(d)}
                          for n, d in sorted(by_name.items())}}


def traced_run(a, b, cfg, programs=None, backend=None):
    """One launch of the persistent kernel with stamps: (C, the [programs, 2, TRACE_SLOTS] stamps)."""
    import torch
    c = torch.full((a.shape[0], b.shape[1]), float("nan"), dtype=a.dtype, device=a.device)   # poisoned
    sms = programs or gemm.num_sms(a.device)
    trace = torch.full((sms, 2, gemm.TRACE_SLOTS), -1, dtype=torch.int64, device=a.device)
    args, grid, meta = gemm.launch_args(a, b, c, cfg, programs=programs, trace=trace)
    gemm.matmul_persistent_kernel[grid](*args, num_warps=cfg.num_warps, backend=backend, **meta)
    return c, trace.cpu()


def main():
    import torch
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True, help="folder for <shape>-<config>.json Chrome traces and summary.json")
    ap.add_argument("--shapes", default="4096x4096x4096,4096x4096x512,16384x2048x4096")
    ap.add_argument("--dtype", default="bfloat16", choices=["bfloat16", "float16"])
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    dtype = getattr(torch, args.dtype)
    results = {}
    for shape in args.shapes.split(","):
        M, N, K = map(int, shape.split("x"))
        a, b = torch.randn(M, K, device="cuda", dtype=dtype), torch.randn(K, N, device="cuda", dtype=dtype)
        ref = a.float() @ b.float()
        for cfg in (gemm.Config("persistent", 128, 256, 64, 3, 16, NO_ZERO_FILL=True),
                    gemm.Config("persistent", 128, 256, 64, 3, 16, NO_ZERO_FILL=True, STREAM_K=True)):
            for _ in range(3):                               # compile, warm the clocks and L2
                c, trace = traced_run(a, b, cfg)
            err = ((c.float() - ref).norm() / ref.norm()).item()
            assert err <= 1e-2, f"{shape} {cfg.name()}: relative error {err}"
            name = f"{shape}-{cfg.name()}"
            with open(os.path.join(args.out, f"{name}.json"), "w") as f:
                json.dump({"traceEvents": phases(trace)}, f)
            results[name] = summary(trace)
            s = results[name]
            print(f"{name}: span {s['span_us']:.1f} us, consumers start "
                  f"within {s['start_spread_us']:.1f} us and finish within {s['end_spread_us']:.1f} us", flush=True)
            for phase, d in s["phases_us"].items():
                print(f"    {phase:32s} median {d['median']:8.2f}  max {d['max']:8.2f}  (x{d['count']})", flush=True)
    with open(os.path.join(args.out, "summary.json"), "w") as f:
        json.dump({"gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "dtype": args.dtype,
                   "results": results}, f, indent=1)


if __name__ == "__main__":
    main()
