"""Cluster operations Gluon 3.6 cannot express, finished in the PTX (docs/cluster_feasibility.md).

Gluon has no multicast TMA load and no arrive on another CTA's mbarrier, and a kernel cannot name an
mbarrier's shared address. The lowering therefore puts markers (inline-asm comments) beside the ordinary
operations and this pass rewrites them after Triton's passes, as `barrier_elision.py` does:
- between `MULTICAST_BEGIN <mask>` and `MULTICAST_END`, every `cp.async.bulk.tensor` global -> shared
  load gains `.multicast::cluster` and the 16-bit CTA mask: the box lands at the same offset in each
  CTA of the mask and completes its bytes on each one's mbarrier;
- after `REMOTE_ARRIVE <rank register>`, the next `mbarrier.arrive` on a CTA-local address becomes a
  `mapa` to CTA `rank`'s twin of that address and an arrive there.
Modules without markers pass through unchanged.
"""
from __future__ import annotations

import re

from ..errors import TlxCompileError

MULTICAST_BEGIN = "tlx.cluster.multicast_begin"
MULTICAST_END = "tlx.cluster.multicast_end"
REMOTE_ARRIVE = "tlx.cluster.remote_arrive"

_TMA_LOAD = re.compile(r"^(\s*(?:@!?%\w+\s+)?cp\.async\.bulk\.tensor\.\dd\.shared::cluster\.global"
                       r"\.mbarrier::complete_tx::bytes)(\s+\[[^\]]*\],\s*\[[^\]]*\],\s*\[[^\]]*\])\s*;")
_ARRIVE = re.compile(r"^(\s*)(@!?%\w+\s+)?mbarrier\.arrive(?:\.release\.cta)?(?:\.shared::cta)?\.b64\s+"
                     r"(\S+),\s*\[(%\w+)\](,\s*%?\w+)?\s*;")


def multicast_begin_asm(mask: int) -> str:
    return f"// {MULTICAST_BEGIN} {mask}\n\tmov.u32 $0, 0;"


def multicast_end_asm() -> str:
    return f"// {MULTICAST_END}\n\tmov.u32 $0, 0;"


def remote_arrive_asm() -> str:
    """Operand $1: the peer's rank (a register the pass reads right after)."""
    return f"// {REMOTE_ARRIVE} $1\n\tmov.u32 $0, 0;"


def rewrite(ptx: str) -> str:
    if MULTICAST_BEGIN not in ptx and REMOTE_ARRIVE not in ptx:
        return ptx
    out, mask, rank, fresh = [], None, None, 0
    for line in ptx.splitlines():
        if MULTICAST_BEGIN in line:
            mask = int(line.split(MULTICAST_BEGIN, 1)[1].split()[0])
        elif MULTICAST_END in line:
            mask = None
        elif REMOTE_ARRIVE in line:
            rank = line.split(REMOTE_ARRIVE, 1)[1].split()[0]
        elif mask is not None and (m := _TMA_LOAD.match(line)):
            line = f"{m.group(1)}.multicast::cluster{m.group(2)}, {mask};"
        elif rank is not None and (m := _ARRIVE.match(line)):
            indent, pred, addr, count = m.group(1), m.group(2) or "", m.group(4), m.group(5) or ""
            fresh += 1
            reg = f"%tlx_remote{fresh}"
            # The default .release.cta, as CUTLASS's ClusterBarrier::arrive(cta_id): what it releases is this
            # CTA's reads of its own shared memory (wgmma, already waited on). `.release.cluster` put a
            # MEMBAR.ALL.GPU before every arrive, on every K step: the first GPU runs lost a third to it.
            line = (f"{indent}{{ .reg .b32 {reg}; mapa.shared::cluster.u32 {reg}, {addr}, {rank}; "
                    f"{pred}mbarrier.arrive.shared::cluster.b64 _, [{reg}]{count}; }}")
            rank = None
        out.append(line)
    if rank is not None:
        raise TlxCompileError("tlx.barrier_arrive(remote_cta_rank=...): no mbarrier.arrive followed its marker in "
                              "the PTX (the lowering changed shape; see tlx/gluon/cluster_ptx.py)")
    return "\n".join(out) + ("\n" if ptx.endswith("\n") else "")
