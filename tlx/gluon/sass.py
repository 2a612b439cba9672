"""Check the SASS that ptxas produced for what PTX cannot show: wgmma descriptors not set on every path.

ptxas 12.8 (the triton 3.6 wheel's) hoists the shared-memory descriptors of a wgmma into uniform
registers. When a loop that may run zero times is the only place one of them is set, a later loop's
HGMMA reads whatever the register held before: an operand from a stale buffer, a wrong answer with no
error (found on the H200: persistent attention with two Q buffers per consumer, causal, rows 0-127;
docs/design.md). The PTX is correct; only the machine code shows it. This module finds such reads
with a must-be-set dataflow over the SASS control-flow graph, on the CPU.
"""
from __future__ import annotations

import os
import re
import subprocess
import tempfile
from dataclasses import dataclass

_LABEL = re.compile(r"^(\.L_x_\d+):")
_INSTR = re.compile(r"^\s*/\*([0-9a-f]{4,})\*/\s+(.*?)\s*;")
_PRED = re.compile(r"^(@!?U?P[T0-9])\s+(.*)$")
_TARGET = re.compile(r"\(\s*(\.L_x_\d+)\s*\)")
_UREG = re.compile(r"^UR(\d+)$")
_DESC = re.compile(r"^gdesc\[UR(\d+)\]")
_BRANCH_TARGETS = re.compile(r"BRANCH_TARGETS\s+([^\"]*)")


@dataclass(frozen=True)
class Instr:
    addr: int
    text: str
    predicated: bool
    op: str
    operands: tuple[str, ...]
    targets: tuple[str, ...] = ()      # an indirect branch's labels, where nvdisasm lists them


def disassemble(cubin: bytes) -> str:
    """SASS text of a cubin, by the nvdisasm that ships with triton."""
    import triton
    nvdisasm = triton.knobs.nvidia.nvdisasm.path
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "k.cubin")
        with open(path, "wb") as f:
            f.write(cubin)
        return subprocess.run([nvdisasm, "-c", path], capture_output=True, text=True, check=True).stdout


def parse(sass: str) -> tuple[list[Instr], dict[str, int]]:
    """Instructions in address order and the index each label points at."""
    instrs, labels, pending = [], {}, []
    for line in sass.splitlines():
        label = _LABEL.match(line.strip())
        if label:
            pending.append(label.group(1))
            continue
        m = _INSTR.match(line)
        if not m:
            continue
        for name in pending:
            labels[name] = len(instrs)
        pending = []
        text = m.group(2)
        pred = _PRED.match(text)
        body = pred.group(2) if pred else text
        op, _, rest = body.partition(" ")
        operands = tuple(o.strip() for o in rest.split(",")) if rest.strip() else ()
        listed = _BRANCH_TARGETS.search(line)
        targets = tuple(t.strip() for t in listed.group(1).split(",")) if listed else ()
        instrs.append(Instr(int(m.group(1), 16), text, pred is not None, op, operands, targets))
    return instrs, labels


def _successors(instrs: list[Instr], labels: dict[str, int]) -> list[list[int]]:
    """Control flow: branches to their label (and on, when predicated); an indirect branch (BRX, JMX)
    to the BRANCH_TARGETS nvdisasm lists for it (the warp-specialized dispatch of three or more
    partitions), else to every label, which can only make the check stricter; a call returns to the
    next instruction."""
    succ = []
    for i, ins in enumerate(instrs):
        nxt = [i + 1] if i + 1 < len(instrs) else []
        if ins.op.startswith(("BRX", "JMX")):
            listed = ins.targets and all(t in labels for t in ins.targets)
            where = [labels[t] for t in ins.targets] if listed else sorted(set(labels.values()))
            succ.append(where + (nxt if ins.predicated else []))
        elif ins.op.startswith(("RET", "EXIT")):
            succ.append(nxt if ins.predicated else [])
        elif ins.op.startswith("BRA"):
            target = _TARGET.search(" ".join(ins.operands))
            succ.append(([labels[target.group(1)]] if target else []) + (nxt if ins.predicated else []))
        else:
            succ.append(nxt)
    return succ


def _sets(ins: Instr) -> int:
    """Uniform registers an unpredicated instruction writes, as a bit mask (its first operand)."""
    if ins.predicated or not ins.operands:
        return 0
    m = _UREG.match(ins.operands[0])
    if not m:
        return 0
    n = int(m.group(1))
    wide = ".64" in ins.op or ".WIDE" in ins.op
    return (0b11 if wide else 0b1) << n


def _descriptor_reads(ins: Instr) -> int:
    """Uniform registers an HGMMA reads as descriptors: A and B (A from shared memory) or B only."""
    if not ins.op.startswith("HGMMA"):
        return 0
    mask = 0
    for operand in ins.operands:
        m = _DESC.match(operand)
        if m:
            n = int(m.group(1))
            a_in_registers = len(ins.operands) > 1 and re.match(r"^R\d+$", ins.operands[1]) is not None
            mask |= (0b1100 if a_in_registers else 0b1111) << n
    return mask


def unset_wgmma_descriptors(sass: str) -> list[str]:
    """HGMMA instructions that may read a descriptor register no path from the entry has set."""
    instrs, labels = parse(sass)
    if not any(ins.op.startswith("HGMMA") for ins in instrs):
        return []
    succ = _successors(instrs, labels)
    preds = [[] for _ in instrs]
    for i, targets in enumerate(succ):
        for t in targets:
            preds[t].append(i)
    everything = (1 << 64) - 1
    set_in = [everything] * len(instrs)
    set_in[0] = 0
    set_out = [everything] * len(instrs)
    changed = True
    while changed:                                  # must-be-set: intersect over predecessors
        changed = False
        for i, ins in enumerate(instrs):
            if i == 0 or not preds[i]:
                incoming = 0
            else:
                incoming = everything
                for p in preds[i]:
                    incoming &= set_out[p]
            outgoing = incoming | _sets(ins)
            if incoming != set_in[i] or outgoing != set_out[i]:
                set_in[i], set_out[i] = incoming, outgoing
                changed = True
    found = []
    for i, ins in enumerate(instrs):
        missing = _descriptor_reads(ins) & ~set_in[i]
        if missing:
            regs = " ".join(f"UR{r}" for r in range(64) if missing >> r & 1)
            found.append(f"/*{ins.addr:04x}*/ {ins.text}: {regs} not set on every path")
    return found
