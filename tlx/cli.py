"""`python -m tlx demo` (the README's main job) and `python -m tlx check FILE` (simulator checks)."""
from __future__ import annotations

import argparse
import sys
import time


def demo(argv) -> int:
    import torch

    import tlx
    from tlx import demo_cases

    cases = demo_cases.cases()
    print(f"tlx {tlx.__version__}: compile reports for sm_90a (no GPU needed)")
    for case in cases:
        t0 = time.time()
        report = tlx.compile(case.kernel, *case.compile_args(), num_warps=case.num_warps, **case.meta)
        print(f"  {case.name:28s} {report}  ({time.time() - t0:.1f} s)")
    if torch.cuda.is_available():
        print("GPU found: running each kernel against torch and timing it")
        for case in cases:
            print("  " + case.run_gpu())
        return 0
    try:
        from tlx import sim  # noqa: F401
        has_sim = hasattr(sim, "launch")
    except ImportError:
        has_sim = False
    if not has_sim:
        print("no GPU and no simulator in this build: compile reports only")
        return 0
    print("no GPU: running each kernel on the CPU simulator against a float64 torch reference")
    failed = 0
    for case in cases:
        line, ok = case.run_sim()
        failed += not ok
        print("  " + line)
    return 1 if failed else 0


def check(argv) -> int:
    ap = argparse.ArgumentParser(prog="python -m tlx check")
    ap.add_argument("path")
    ap.add_argument("--schedules", type=int, default=8)
    args = ap.parse_args(argv)
    from tlx import sim
    report = sim.check_file(args.path, schedules=args.schedules)
    print(report.render())
    return 0 if report.ok else 1


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    commands = {"demo": demo, "check": check}
    if not argv or argv[0] not in commands:
        print("usage: python -m tlx {demo | check FILE [--schedules N]}")
        return 2
    return commands[argv[0]](argv[1:])
