"""SM clock and board power while each attention implementation runs under sustained timing.

Nsight Compute timed one launch of ours against cuDNN's at 1.12x (D=64, 4096 keys) where `bench/attention.py`,
timing a median over many launches back to back, read 1.06-1.09x. This probe asks whether the two kernels hold
different clocks under load: it times each implementation with `do_bench` for a few seconds (L2 flushed between
calls, as bench/attention.py does) while `nvidia-smi` samples the SM clock and power, and reports TFLOP/s, the
median clock and power of the window, TFLOP/s per GHz and per joule. Each tlx configuration is first checked
into a NaN-poisoned output against an fp32 reference (up to 4096 keys, as bench/attention.py; cuDNN's output
above, where the fp32 scores outgrow memory).

    PYTHONPATH=. python3 bench/clock_probe.py --cells 64x4096,128x8192 [--seconds 3] [--variant Q_IN_REGS=1] [--out FILE]

--variant also probes the op's default configuration with those Config fields replaced (`variant` rows).
"""
from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import statistics
import subprocess
import threading
import time

import torch
import triton
from torch.nn.attention import SDPBackend
from triton.testing import do_bench

from bench.attention import REFERENCE_MAX_KEYS, fa3_inputs, fp32_reference, sdpa
from tlx.kernels import attention


class Sampler:
    """`nvidia-smi` in loop mode in the background: (time, SM MHz, watts) every `period_ms`."""

    def __init__(self, period_ms: int = 50):
        self.samples: list[tuple[float, float, float]] = []
        self.proc = subprocess.Popen(["nvidia-smi", "--query-gpu=clocks.sm,power.draw", "--format=csv,noheader,nounits",
                                      f"--loop-ms={period_ms}"], stdout=subprocess.PIPE, text=True)
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self):
        for line in self.proc.stdout:
            try:
                mhz, watts = (float(x) for x in line.split(","))
            except ValueError:                       # a header or a "[N/A]" field
                continue
            self.samples.append((time.monotonic(), mhz, watts))

    def window(self, t0: float, t1: float) -> tuple[float, float, int]:
        """Median SM MHz and watts of the samples taken in [t0, t1], and their count."""
        inside = [(m, w) for t, m, w in self.samples if t0 <= t <= t1]
        if not inside:
            raise RuntimeError(f"clock_probe: no nvidia-smi sample in a {t1 - t0:.1f} s window")
        return statistics.median(m for m, _ in inside), statistics.median(w for _, w in inside), len(inside)

    def close(self):
        self.proc.terminate()
        self.proc.wait()


def probe_cell(D: int, S: int, causal: bool, seconds: float, sampler: Sampler, variant: dict) -> dict:
    B, H, q, k, v = fa3_inputs(D, S, torch.bfloat16)
    cudnn = sdpa(SDPBackend.CUDNN_ATTENTION)
    configs = {"tlx": None}
    if variant:
        configs["variant"] = dataclasses.replace(attention.default_config(D, S, causal), **variant)
    impls = {"cudnn": lambda: cudnn(q, k, v, causal)}
    impls.update({name: (lambda cfg=cfg: attention.attention(q, k, v, causal=causal, config=cfg))
                  for name, cfg in configs.items()})
    # fp32 as bench/attention.py checks (up to REFERENCE_MAX_KEYS), cuDNN's output above
    reference = "fp32" if S <= REFERENCE_MAX_KEYS else "cudnn"
    ref = fp32_reference(q, k, v, causal) if S <= REFERENCE_MAX_KEYS else cudnn(q, k, v, causal).float()
    row = {"D": D, "S": S, "causal": causal, "variant": variant, "reference": reference}
    for name, cfg in configs.items():
        out = attention.attention(q, k, v, causal=causal, config=cfg, out=torch.full_like(q, float("nan"))).float()
        err = ((out - ref).norm() / ref.norm()).item()          # (NaN, where the poisoned output was not
        if not err <= 1e-2:                                     # written, fails too)
            raise RuntimeError(f"clock_probe: D={D} S={S} causal={causal}: {name} differs from the {reference} "
                               f"reference by {err:.2e}")
        row[f"{name}_rel_err"] = err
    del ref
    for name in list(impls) * 2:                                # twice each, in turn
        t0 = time.monotonic()
        ms = do_bench(impls[name], warmup=200, rep=int(seconds * 1000))
        mhz, watts, n = sampler.window(t0 + 0.5, time.monotonic())  # (past the warmup's start)
        tflops = attention.tflops(B, H, S, D, causal, ms)
        for key, value in (("tflops", tflops), ("mhz", mhz), ("watts", watts), ("samples", n)):
            row.setdefault(f"{name}_{key}", []).append(value)
        print(f"D={D:3d} S={S:5d} causal={int(causal)} {name:7s} {tflops:6.1f} TFLOPS  {mhz:6.0f} MHz  "
              f"{watts:5.0f} W  {tflops / mhz * 1000:6.1f} TFLOPS/GHz  {tflops / watts:5.3f} TFLOP/J  ({n} samples)",
              flush=True)
    for name in impls:
        row[f"{name}_tflops_per_ghz"] = statistics.median(t / m * 1000 for t, m in
                                                          zip(row[f"{name}_tflops"], row[f"{name}_mhz"]))
    row["ratio"] = statistics.median(row["tlx_tflops"]) / statistics.median(row["cudnn_tflops"])
    row["ratio_per_clock"] = row["tlx_tflops_per_ghz"] / row["cudnn_tflops_per_ghz"]
    if variant:
        row["variant_ratio"] = statistics.median(row["variant_tflops"]) / statistics.median(row["cudnn_tflops"])
        row["variant_ratio_per_clock"] = row["variant_tflops_per_ghz"] / row["cudnn_tflops_per_ghz"]
    print("  " + ", ".join(f"{name} ratio {row[key]:.3f}, per clock {row[key + '_per_clock']:.3f}"
                           for name, key in (("tlx", "ratio"), ("variant", "variant_ratio")) if key in row), flush=True)
    return row


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cells", default="64x4096,128x8192", help="DxS pairs, comma-separated")
    ap.add_argument("--causal", action="store_true", help="causal masks (default: non-causal)")
    ap.add_argument("--seconds", type=float, default=3.0, help="timing window per implementation and pass")
    ap.add_argument("--variant", default="", help="Config fields NAME=INT,... replaced in the default, probed too")
    ap.add_argument("--out", default="")
    args = ap.parse_args()
    variant = {}
    defaults = {f.name: f.default for f in dataclasses.fields(attention.Config)}
    for field in filter(None, args.variant.split(",")):
        name, _, value = field.partition("=")
        if name not in defaults or not value.lstrip("-").isdigit():
            raise SystemExit(f"clock_probe: --variant wants Config fields as NAME=INT, got {field!r}")
        variant[name] = bool(int(value)) if isinstance(defaults[name], bool) else int(value)
    cells = []
    for cell in args.cells.split(","):
        try:
            D, S = (int(x) for x in cell.lower().split("x"))
        except ValueError:
            raise SystemExit(f"clock_probe: --cells wants DxS pairs like 64x4096, got {cell!r}") from None
        cells.append((D, S))
    sampler = Sampler()
    try:
        rows = [probe_cell(D, S, args.causal, args.seconds, sampler, variant) for D, S in cells]
    finally:
        sampler.close()
    meta = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "triton": triton.__version__,
            "date": datetime.date.today().isoformat(), "timer": "do_bench median over a window; nvidia-smi medians"}
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"meta": meta, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
