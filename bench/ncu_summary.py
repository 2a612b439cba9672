"""Where one profiled kernel's warps wait, from the Nsight Compute pages that gpu_session's `ncu` part writes:
the stall reasons' shares of all samples, the hot SASS instructions in address order (each with its share
of samples, the running total, how often it ran and its main stall reason), and a few pipe utilizations.
    python3 bench/ncu_summary.py OUT/ncu_sass.csv[.gz] [--raw OUT/ncu_raw.csv] [--min-share 0.3]
The SASS page is `ncu --import R --csv --page source --print-source sass`: a row naming the kernel, a header
row, then one row per instruction. Synchronizing instructions (HGMMA, SYNCS, BAR, DEPBAR, TMA, setmaxnreg)
are always listed, so the listing shows the kernel's phases around the hot spots."""
from __future__ import annotations

import argparse
import csv
import gzip
import re
from dataclasses import dataclass, field

# ops that mark a kernel's phases (listed whatever their share)
PHASE_MARK = re.compile(r"HGMMA|SYNCS|BAR\.|DEPBAR|UTMA|USETMAXREG|EXIT")
# raw-page metrics worth a line: how busy the tensor cores, the MUFU (xu), FMA and ALU pipes and the issue slots were
RAW_METRICS = {
    "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active": "tensor pipe active (% of active cycles)",
    "sm__inst_executed_pipe_xu.avg.pct_of_peak_sustained_active": "xu (MUFU) pipe (% of peak)",
    "sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active": "fma pipe (% of peak)",
    "sm__pipe_alu_cycles_active.avg.pct_of_peak_sustained_active": "alu pipe (% of peak)",
    "smsp__issue_active.avg.pct_of_peak_sustained_active": "issue slots busy (% of active cycles)",
    "smsp__warps_active.avg.per_cycle_active": "warps resident per scheduler",
    "gpu__time_duration.sum": "duration",
}


@dataclass
class Instruction:
    address: int
    source: str
    samples: float
    executed: float
    stalls: dict[str, float] = field(default_factory=dict)

    @property
    def main_stall(self) -> str:
        return max(self.stalls, key=self.stalls.get) if self.stalls else "-"


def _number(text: str) -> float:
    text = text.replace(",", "").strip()
    return float(text) if text else 0.0


def _open(path: str):
    """A csv page, gzip-compressed where its name ends in .gz (as bench/results keeps the SASS pages)."""
    return gzip.open(path, "rt", newline="") if path.endswith(".gz") else open(path, newline="")


def read_sass(path: str) -> tuple[str, list[Instruction]]:
    """(kernel name, instructions in address order) of an ncu SASS source page."""
    with _open(path) as f:
        rows = list(csv.reader(f))
    if len(rows) < 2 or not rows[0] or rows[0][0] != "Kernel Name" or "Address" not in rows[1]:
        raise SystemExit(f"ncu_summary.py: {path} is not an ncu SASS page (want `ncu --import R --csv --page source "
                         f"--print-source sass`: a 'Kernel Name' row, then a header row with 'Address')")
    kernel, header = rows[0][1], rows[1]
    col = {name: i for i, name in enumerate(header)}
    for needed in ("Source", "Warp Stall Sampling (All Samples)", "Instructions Executed"):
        if needed not in col:
            raise SystemExit(f"ncu_summary.py: {path} has no column {needed!r}")
    stall_cols = {name[len("stall_"):]: i for name, i in col.items()
                  if name.startswith("stall_") and "Not Issued" not in name}
    out = []
    for row in rows[2:]:
        if len(row) < len(header) or not row[col["Address"]].startswith("0x"):
            continue
        out.append(Instruction(int(row[col["Address"]], 16), row[col["Source"]].strip(),
                               _number(row[col["Warp Stall Sampling (All Samples)"]]),
                               _number(row[col["Instructions Executed"]]),
                               {name: _number(row[i]) for name, i in stall_cols.items()}))
    if not out:
        raise SystemExit(f"ncu_summary.py: {path} lists no instructions")
    out.sort(key=lambda ins: ins.address)
    return kernel, out


def stall_shares(instructions: list[Instruction]) -> dict[str, float]:
    """Each stall reason's share of all samples, largest first."""
    total = sum(ins.samples for ins in instructions) or 1.0
    sums: dict[str, float] = {}
    for ins in instructions:
        for name, n in ins.stalls.items():
            sums[name] = sums.get(name, 0.0) + n
    return dict(sorted(((k, v / total) for k, v in sums.items()), key=lambda kv: -kv[1]))


def hot_listing(instructions: list[Instruction], min_share: float) -> list[str]:
    """Lines for instructions holding at least `min_share` (a fraction) of the samples, plus the phase marks
    that ran; offsets are from the kernel's first instruction."""
    total = sum(ins.samples for ins in instructions) or 1.0
    base, running, lines = instructions[0].address, 0.0, []
    for ins in instructions:
        running += ins.samples
        share = ins.samples / total
        if share >= min_share or (PHASE_MARK.search(ins.source) and ins.executed > 0):
            lines.append(f"{ins.address - base:7x} {share:6.1%} {running / total:7.1%} {int(ins.executed):>9} "
                         f"{ins.main_stall:<16} {ins.source[:90]}")
    return lines


def read_raw(path: str) -> dict[str, str]:
    """Metric name -> 'value unit' for the first kernel of an ncu raw page."""
    with _open(path) as f:
        rows = list(csv.reader(f))
    if len(rows) < 3:
        raise SystemExit(f"ncu_summary.py: {path} is not an ncu raw page (want a header, a units row and a kernel row)")
    header, units, values = rows[0], rows[1], rows[2]
    return {name: f"{value} {unit}".strip() for name, unit, value in zip(header, units, values)}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("sass", help="ncu SASS source page (csv)")
    ap.add_argument("--raw", help="ncu raw page (csv) of the same report")
    ap.add_argument("--min-share", type=float, default=0.3, help="list instructions with at least this %% of samples")
    args = ap.parse_args(argv)
    kernel, instructions = read_sass(args.sass)
    total = sum(ins.samples for ins in instructions)
    print(f"kernel {kernel}: {len(instructions)} instructions, {int(total)} samples")
    if args.raw:
        raw = read_raw(args.raw)
        for metric, label in RAW_METRICS.items():
            if metric in raw:
                print(f"  {label}: {raw[metric]}")
    print("stall reasons (share of all samples): " + ", ".join(
        f"{name} {share:.1%}" for name, share in stall_shares(instructions).items() if share >= 0.005))
    print(f"{'offset':>7} {'share':>6} {'running':>7} {'executed':>9} {'main stall':<16} instruction")
    print("\n".join(hot_listing(instructions, args.min_share / 100)))


if __name__ == "__main__":
    main()
