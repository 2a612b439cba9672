"""Drop the warp-group `bar.sync` that Triton's Membar pass puts before an mbarrier operation, where the
kernel marked the operation `warpgroup_sync=False` and the PTX proves the barrier guards nothing.

Membar orders every pair of shared-memory accesses of a warp-specialized partition with a warp-group
`bar.sync`, and it counts an mbarrier arrive or wait as one. A consumer's pipeline loop so gets three
per step (before each stage release and before the next stage's wait): the warp group's four warps line
up three times per wgmma step. CUTLASS releases a stage from one thread right after its
`warpgroup_wait`, with no such barrier, and it is right: a wgmma is issued by all four warps together,
so when one warp sees a wgmma group retired, every warp has issued it, passed the waits before it,
and the hardware has finished reading its shared memory. What that argument does not cover is an
ordinary (generic-proxy) shared-memory access by some warp, or an mbarrier wait that no retired wgmma
follows (a warp could still be before it). So a marked barrier is dropped only if, walking back over the control-flow graph from it (`_walk_back`, with the other marked barriers gone
too), every path reaches a kept barrier or a `wgmma.commit_group` whose group a later
`wgmma.wait_group` retired, and meets no shared-memory access before that. An mbarrier wait on the way
is allowed once a wgmma was issued after it: a late warp may still be before that wait, which is
harmless unless its barrier completes another phase first, and a stage ring releases a stage only after
a wgmma issued after its wait retired (CUTLASS's mainloop relies on the same). The PTX cannot see which
barrier guards what, so the simulator checks that part (its rule 8 reports a barrier that completes its
next phase while a marked op let a warp lag before its wait; rule 6, a release before the dots reading
the stage retired). A marked operation whose barrier cannot go is a compile error naming its source
line: the mark promised something the code does not keep.

The pass runs on the PTX (`ptx_stage`, installed for tlx's compiles by `installed()`), only on modules
that carry the marker; everything else compiles as before.
"""
from __future__ import annotations

import contextlib
import re
from dataclasses import dataclass, field

from ..errors import TlxCompileError

MARKER = "tlx.no_warpgroup_sync"
BARRIER_PROOF_ONLY = "(barrier proof only)"


def marker_asm(barrier_proof_only: bool) -> str:
    """The inline asm of a mark. Barrier proof only: the op runs in more than one warp group (a retired
    wgmma says nothing of the other group), or it is a TMA load (no wgmma proof covers its slot)."""
    return f"// {MARKER}{' ' + BARRIER_PROOF_ONLY if barrier_proof_only else ''}\n\tmov.u32 $0, 0;"

_LABEL = re.compile(r"^\s*(\$?[A-Za-z_$][\w$]*):")
_BRANCH = re.compile(r"^\s*(@!?%\w+\s+)?bra(\.uni)?\s+(\$?[\w$]+)\s*;")
_RETURN = re.compile(r"^\s*(@!?%\w+\s+)?(ret|exit)\b")
_UNCONDITIONAL = re.compile(r"^\s*bra(\.uni)?\s|^\s*(ret|exit)\b")
_BARRIER = re.compile(r"^\s*(@!?%\w+\s+)?(bar|barrier)\.(sync|red)\b")
_LOC = re.compile(r"^\s*\.loc\s+\d+\s+(\d+)\s+(\d+)\s*(//\s*(.*))?$")
_INDIRECT = re.compile(r"\bbrx\.idx\b")
_FUNCTION = re.compile(r"^\s*(\.(visible|weak|extern)\s+)*\.(entry|func)\b")
ENTRY = object()                   # _units' sentinel: a function's header (its first block is an entry)

NEUTRAL, BARRIER, WGMMA_WAIT, WGMMA_COMMIT, MBAR_WAIT, MBAR_ARRIVE, TMA_LOAD, MARK, UNSAFE = range(9)


def _classify(text: str) -> int:
    """What one instruction, or one inline-asm block as a whole, means to the walk back."""
    if MARKER in text:
        return MARK
    body = "\n".join(line.split("//", 1)[0] for line in text.splitlines())
    if _BARRIER.search(body) or re.search(r"(^|\s|;)(bar|barrier)\.(sync|red)\b", body):
        return BARRIER
    if re.search(r"\bmbarrier\.(try_wait|test_wait)", body):
        return MBAR_WAIT
    if re.search(r"\bmbarrier\.(init|inval)", body):
        return UNSAFE
    if re.search(r"\bmbarrier\.arrive", body):
        return MBAR_ARRIVE
    if re.search(r"\bwgmma\.wait_group", body):
        return WGMMA_WAIT
    if re.search(r"\bwgmma\.commit_group", body):
        return WGMMA_COMMIT
    if re.search(r"\bcp\.async\.bulk\.wait_group", body):
        return UNSAFE              # one thread learns a TMA copy is done: the others need a barrier
    if re.search(r"\bcp\.async\.bulk\.tensor\.\w+\.shared::\w+\.global\b", body):
        return TMA_LOAD            # one thread issues a TMA load (global -> shared)
    if re.search(r"\b(cp|cp\.reduce)\.async\.bulk\b", body):
        return NEUTRAL             # one thread issues a TMA copy; its completion is waited for apart
    if re.search(r"\b(ldmatrix|stmatrix|cp\.async|st\.async|red\.async|fence\.proxy|tcgen05|call)\b", body):
        return UNSAFE
    for m in re.finditer(r"(?:^|[;{}\s])(?:@!?%\w+\s+)?((?:ld|st|ldu|atom|red)(?:\.[\w:]+)*)\s", body):
        spaces = set(m.group(1).split(".")[1:])
        if not spaces & {"global", "param", "local", "const"} or any(s.startswith("shared") for s in spaces):
            return UNSAFE          # shared, or a generic address that may be shared
    return NEUTRAL


@dataclass
class _Unit:
    line: int                      # index of the unit's first line
    end: int                       # index past its last line
    kind: int
    text: str


@dataclass
class _Block:
    units: list[_Unit] = field(default_factory=list)
    preds: list[int] = field(default_factory=list)
    label: str | None = None
    entry: bool = False            # a function's first block; any other block with no predecessor is dead code


def _units(lines: list[str]) -> list[_Unit | str | object]:
    """Instructions, inline-asm blocks (one unit each: their local labels and branches stay inside),
    labels (as plain strings) and function headers (ENTRY) in order."""
    out: list[_Unit | str | object] = []
    i = 0
    while i < len(lines):
        s = lines[i].strip()
        if s.startswith("// begin inline asm"):
            j = i + 1
            while j < len(lines) and not lines[j].strip().startswith("// end inline asm"):
                j += 1
            text = "\n".join(lines[i + 1:j])
            out.append(_Unit(i, j + 1, _classify(text), text))
            i = j + 1
            continue
        m = _LABEL.match(lines[i])
        if _FUNCTION.match(lines[i]):
            out.append(ENTRY)
        elif m and not s.startswith("."):
            out.append(m.group(1))
        elif s and not s.startswith("//") and not s.startswith("."):
            out.append(_Unit(i, i + 1, _classify(s), s))
        i += 1
    return out


def _blocks(lines: list[str]) -> list[_Block]:
    """Basic blocks of the PTX text with their predecessors (fall-through and branches). The entry
    of each function is a block with no predecessor (`entry`). A label right after an unconditional
    branch that no branch names (LLVM's `$L__tmp` debug-line labels) also starts a block with none:
    dead code, which no path runs through (unless an indirect branch, `brx.idx`, could reach it)."""
    blocks: list[_Block] = [_Block(entry=True)]
    falls_through, closed = True, False            # into the next block; the last block ended in a branch
    for u in _units(lines):
        if u is ENTRY:
            blocks.append(_Block(entry=True))
            falls_through, closed = True, False
            continue
        if isinstance(u, str) or closed:
            blocks.append(_Block(label=u if isinstance(u, str) else None,
                                 preds=[len(blocks) - 1] if falls_through else []))
            falls_through, closed = True, False
            if isinstance(u, str):
                continue
        blocks[-1].units.append(u)
        if u.end == u.line + 1 and (_BRANCH.match(u.text) or _RETURN.match(u.text)):
            falls_through, closed = not _UNCONDITIONAL.match(u.text), True
    where = {b.label: n for n, b in enumerate(blocks) if b.label}
    for n, b in enumerate(blocks):
        for u in b.units:
            m = u.end == u.line + 1 and _BRANCH.match(u.text)
            if m and m.group(3) in where:
                blocks[where[m.group(3)]].preds.append(n)
    if any(_INDIRECT.search(line) for line in lines):   # a branch table's labels have no predecessor here
        for b in blocks:
            b.entry = b.entry or not b.preds
    return blocks


_WAIT_GROUP = re.compile(r"\bwgmma\.wait_group(?:\.\w+)*\s+(\d+)")


def _walk_back(blocks: list[_Block], start: tuple[int, int], removable: set[int], barrier_proof_only: bool = False
               ) -> str | None:
    """None if every path back from unit `start` (block, index; the unit itself excluded) is proven to
    need no warp-group barrier; otherwise what it met. A path is proven at a kept barrier, or at a
    `wgmma.commit_group` that a later `wgmma.wait_group N` retired (N more commits lie between them):
    every warp issued that wgmma, so every warp is past everything before it. Before that point the
    path may cross mbarrier waits only once some wgmma was issued after them (the stage ring's argument,
    in the module docstring) and no shared-memory access at all. `barrier_proof_only`: only a kept barrier
    proves, reached over single-thread issues alone (mbarrier arrives, TMA loads, plain arithmetic)."""
    seen: set[tuple[int, int, bool, int | None]] = set()
    stack: list[tuple[int, int, bool, int | None]] = [(*start, False, None)]
    while stack:
        b, i, issued_after, need = stack.pop()   # need: commits back to the one a seen wait_group retired
        if (b, i, issued_after, need) in seen:
            continue
        seen.add((b, i, issued_after, need))
        block = blocks[b]
        for u in reversed(block.units[:i]):
            if u.kind == BARRIER and u.line not in removable:
                break
            if barrier_proof_only and u.kind in (WGMMA_WAIT, WGMMA_COMMIT, MBAR_WAIT, UNSAFE):
                return (f"{u.text.strip()[:80]!r} before any barrier (a mark in more than one warp group, or on a "
                        "TMA load, needs a barrier kept before it with only mbarrier arrives and TMA loads between)")
            if u.kind == WGMMA_WAIT:
                m = _WAIT_GROUP.search(u.text)
                pending = int(m.group(1)) + 1 if m else None
                if pending is not None:
                    need = pending if need is None else min(need, pending)
            elif u.kind == WGMMA_COMMIT and need is not None:
                issued_after, need = True, need - 1
                if need == 0:
                    break
            elif u.kind == MBAR_WAIT and not issued_after:
                return (f"an mbarrier wait with no wgmma issued and retired after it: {u.text.strip()[:80]!r}"
                        if need is None else f"a wgmma.wait_group with no wgmma issued since the mbarrier wait "
                        f"{u.text.strip()[:80]!r}")
            elif u.kind == UNSAFE:
                return f"a shared-memory access with no wgmma issued after it and retired: {u.text.strip()[:80]!r}"
        else:
            if not block.preds and block.entry:
                return "the start of the function"
            stack.extend((p, len(blocks[p].units), issued_after, need) for p in block.preds)
    return None


def _source_line(lines: list[str], at: int) -> str:
    for n in range(at, -1, -1):
        m = _LOC.match(lines[n])
        if m:
            return (m.group(4) or f"line {m.group(1)}").split(" @[")[0].strip()
    return "an unknown line"


def elide(ptx: str) -> tuple[str, int]:
    """The PTX without the barriers that marked mbarrier operations do not need, and how many went.
    Raises TlxCompileError for a marked operation whose barrier must stay."""
    if MARKER not in ptx:
        return ptx, 0
    lines = ptx.splitlines()
    blocks = _blocks(lines)
    candidates: dict[int, tuple[int, int]] = {}    # barrier line -> its (block, index)
    marks: dict[int, int] = {}                     # barrier line -> the marker's line
    strict: set[int] = set()                       # barrier lines whose proof must be a kept barrier
    for b, block in enumerate(blocks):
        units = block.units
        for i, u in enumerate(units):
            if u.kind != MARK:
                continue
            j = i + 1
            while j < len(units) and units[j].kind == NEUTRAL:
                j += 1
            if j < len(units) and units[j].kind == BARRIER:
                k = j + 1
                while k < len(units) and units[k].kind == NEUTRAL:
                    k += 1
                if k < len(units) and units[k].kind in (MBAR_WAIT, MBAR_ARRIVE, TMA_LOAD):
                    candidates[units[j].line] = (b, j)
                    marks[units[j].line] = u.line
                    if BARRIER_PROOF_ONLY in u.text or units[k].kind == TMA_LOAD:
                        strict.add(units[j].line)
    removable = set(candidates)
    # Every mark must hold, each with the other marked barriers in place first (the error then names the
    # mark whose own window is wrong), then all of them gone together.
    for others in (set(), removable):
        for line in sorted(candidates):
            why = _walk_back(blocks, candidates[line], others, line in strict)
            if why is not None:
                raise TlxCompileError(
                    f"tlx.barrier_arrive/barrier_wait/async_descriptor_load(warpgroup_sync=False) at "
                    f"{_source_line(lines, marks[line])}: "
                    f"the warp group must be in line here (walking back to the last barrier or retired wgmma, the "
                    f"code meets {why}); drop warpgroup_sync=False there, or retire the wgmmas that read the "
                    "buffers (async_dot_wait) first")
    out = [line for n, line in enumerate(lines) if n not in removable]
    return "\n".join(out) + ("\n" if ptx.endswith("\n") else ""), len(removable)


def _hook(previous):
    def hook(backend, stages, options, language, capability):
        if previous is not None:
            previous(backend, stages, options, language, capability)
        if "ptx" not in stages:
            return
        make_ptx = stages["ptx"]

        def ptx_stage(src, metadata):
            from . import cluster_ptx               # multicast loads and remote arrives first (their markers)
            return elide(cluster_ptx.rewrite(make_ptx(src, metadata)))[0]
        stages["ptx"] = ptx_stage
    return hook


@contextlib.contextmanager
def installed():
    """Triton's stage hook set for the duration of one tlx compile (the previous hook still runs first)."""
    from triton import knobs
    previous = knobs.runtime.add_stages_inspection_hook
    knobs.runtime.add_stages_inspection_hook = _hook(previous)
    try:
        yield
    finally:
        knobs.runtime.add_stages_inspection_hook = previous


def with_pass(compile_fn):
    """`compile_fn` run with the pass installed."""
    def run(*args, **kwargs):
        with installed():
            return compile_fn(*args, **kwargs)
    return run
