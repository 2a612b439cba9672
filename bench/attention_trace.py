"""Where a persistent attention kernel's time goes per tile: the kernel's TRACE stamps (the GPU's
nanosecond timer, one time base for all SMs) turned into per-phase medians and a Chrome trace (open it
in ui.perfetto.dev or chrome://tracing: a process per program, a thread per consumer warp group).
    PYTHONPATH=. python3 bench/attention_trace.py --out DIR [--shapes 64x1024c,64x1024,128x1024c]
A shape is DxS, then "c" for causal and the tile order: none for the default's, "s" for the fixed rounds,
"d" for DYNAMIC tiles, "b" for BALANCED ones, "db" for a balanced table with a dynamic tail (B*S = 16384,
H*D = 2048 as in bench/attention.py); each runs its default configuration (which must be persistent; "s",
"d" and "b" make it persistent), three stamped launches (compile, warm-up),
the last checked against torch and kept. Phases per consumer and tile: the wait for Q, the K/V blocks,
the output store with the LSE, and the gap to the next tile's start; and when the programs finished
(their spread is the load imbalance)."""
from __future__ import annotations

import argparse
import json
import os
import statistics
from dataclasses import replace

from tlx.kernels import attention

PHASES = ("wait for Q", "K/V blocks", "store", "gap to next tile")


def tile_phases(trace) -> list[tuple[int, int, int, str, int, int]]:
    """(program, consumer, tile, phase, start ns, end ns) for every stamped phase of a
    [programs, consumers, TRACE_TILES, TRACE_STAMPS] int64 tensor (-1 = never stamped)."""
    out = []
    for pid, prog in enumerate(trace.tolist()):
        for cid, tiles in enumerate(prog):
            for k, st in enumerate(tiles):
                if min(st) < 0:
                    continue
                out += [(pid, cid, k, PHASES[i], st[i], st[i + 1]) for i in range(3)]
                nxt = tiles[k + 1] if k + 1 < len(tiles) else None
                if nxt is not None and nxt[0] >= 0:
                    out.append((pid, cid, k, PHASES[3], st[3], nxt[0]))
    return out


def summary(trace) -> dict:
    """Microseconds: the span from the first stamp to the last, and per phase the median, the max and
    the share of all consumers' stamped time."""
    rows = tile_phases(trace)
    t0 = min(r[4] for r in rows)
    span = (max(r[5] for r in rows) - t0) / 1e3
    by_phase: dict[str, list[float]] = {}
    for _, _, _, phase, start, end in rows:
        by_phase.setdefault(phase, []).append((end - start) / 1e3)
    total = sum(sum(d) for d in by_phase.values())
    ends: dict[int, int] = {}
    for pid, _, _, _, _, end in rows:
        ends[pid] = max(ends.get(pid, end), end)
    finish = sorted((e - t0) / 1e3 for e in ends.values())
    return {"span_us": span, "tiles": len(by_phase.get(PHASES[0], [])),
            "program_end_us": {"min": finish[0], "median": statistics.median(finish), "max": finish[-1]},
            "program_ends_us": [(ends[pid] - t0) / 1e3 for pid in sorted(ends)],     # by program id
            "phases_us": {p: {"median": statistics.median(d), "max": max(d), "share": sum(d) / total}
                          for p, d in by_phase.items()}}


def chrome_events(trace) -> list[dict]:
    rows = tile_phases(trace)
    t0 = min(r[4] for r in rows)
    return [{"name": phase, "ph": "X", "pid": pid, "tid": cid, "ts": (start - t0) / 1e3, "dur": (end - start) / 1e3,
             "args": {"tile": k}} for pid, cid, k, phase, start, end in rows]


def traced_run(q, k, v, causal: bool, cfg: attention.Config, backend=None):
    """One launch with stamps: (O, LSE, the [programs, consumers, TRACE_TILES, TRACE_STAMPS] stamps)."""
    import torch
    B, H, S, D = q.shape
    o = torch.full_like(q, float("nan"))                                        # poisoned
    lse = torch.empty(B, H, S, device=q.device, dtype=torch.float32)
    programs = cfg.PROGRAMS or attention.num_sms(q.device)     # at most; launch_args may launch fewer
    trace = torch.full((programs, cfg.BM // attention.CONSUMER_ROWS, attention.TRACE_TILES, attention.TRACE_STAMPS),
                       -1, dtype=torch.int64, device=q.device)
    args, grid, meta, cfg = attention.launch_args(q, k, v, o, lse, D ** -0.5, "bhsd", cfg,
                                                  attention.Features(causal=causal), trace=trace)
    attention.attention_fwd_kernel[grid](*args, num_warps=cfg.num_warps, backend=backend, **meta)
    return o, lse, trace.cpu()


def main():
    import torch
    import torch.nn.functional as F
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True, help="folder for <shape>.json Chrome traces and summary.json")
    ap.add_argument("--shapes", default="64x1024c,64x1024cs,64x1024,128x1024c,128x1024cs,64x4096c,64x4096cs")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    results = {}
    for shape in args.shapes.split(","):
        flags = shape.lstrip("0123456789x")
        causal, dynamic, balanced, static = "c" in flags, "d" in flags, "b" in flags, "s" in flags
        D, S = map(int, shape.rstrip("cdbs").split("x"))
        B, H = 16384 // S, 2048 // D
        q, k, v = (torch.randn(B, H, S, D, device="cuda", dtype=torch.bfloat16) for _ in range(3))
        cfg = attention.default_config(D, S, causal)
        if dynamic or balanced or static:
            cfg = replace(cfg, PERSISTENT=True, DYNAMIC=dynamic, BALANCED=balanced)
        if not cfg.PERSISTENT:
            raise SystemExit(f"{shape}: the default config {cfg} is not persistent; TRACE needs a persistent one")
        for _ in range(3):                                   # compile, warm the clocks and L2
            o, lse, trace = traced_run(q, k, v, causal, cfg)
        ref = F.scaled_dot_product_attention(q.float(), k.float(), v.float(), is_causal=causal)
        err = ((o.float() - ref).norm() / ref.norm()).item()
        assert err <= 1e-2, f"{shape}: relative error {err}"
        with open(os.path.join(args.out, f"{shape}.json"), "w") as f:
            json.dump({"traceEvents": chrome_events(trace)}, f)
        s = results[shape] = {"config": repr(cfg), **summary(trace)}
        e = s["program_end_us"]
        print(f"{shape}: span {s['span_us']:.1f} us, {s['tiles']} stamped tile-consumers, programs end at "
              f"{e['min']:.1f} / {e['median']:.1f} / {e['max']:.1f} us (min / median / max)", flush=True)
        for phase, d in s["phases_us"].items():
            print(f"    {phase:18s} median {d['median']:8.2f}  max {d['max']:8.2f}  share {d['share']:.1%}", flush=True)
    with open(os.path.join(args.out, "summary.json"), "w") as f:
        json.dump({"gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "results": results}, f, indent=1)


if __name__ == "__main__":
    main()
