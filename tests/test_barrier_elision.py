"""The PTX pass that drops Membar's warp-group bar.sync before mbarrier operations marked
`warpgroup_sync=False` (tlx/gluon/barrier_elision.py): what it removes, what it refuses, and what it
does to the library kernels."""
from dataclasses import replace

import pytest
import torch

import tlx
from tlx.errors import TlxCompileError
from tlx.gluon import barrier_elision
from tlx.kernels import attention, gemm

MARK = ["\t// begin inline asm", f"\t// {barrier_elision.MARKER}", "\tmov.u32 \t%r90, 0;", "\t// end inline asm"]
ARRIVE = ["\t// begin inline asm", "\t@%p11 mbarrier.arrive.shared::cta.b64 _, [%r125];", "\t// end inline asm"]
STRICT_MARK = [MARK[0], f"\t// {barrier_elision.MARKER} {barrier_elision.BARRIER_PROOF_ONLY}", *MARK[2:]]
EXPECT = ["\t@%p2 mbarrier.arrive.expect_tx.shared.b64 _, [%r9], 49152;"]
TMA_LOAD = ["\t@%p3 cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%r1], [%rd1, {%r2, %r3}], "
            "[%r9];"]
WAIT = ["\t// begin inline asm", "\t{", "\t.reg .pred complete;", "\twaitLoop:",
        "\tmbarrier.try_wait.parity.shared.b64 complete, [%r114], %r115;", "\t@!complete bra.uni waitLoop;", "\t}",
        "\t// end inline asm"]


def kernel(*body: str) -> str:
    """A PTX function around `body`: a partition start (barrier.sync 1), then the body as a loop."""
    return "\n".join([".visible .entry k(", ")", "{", "\tbarrier.sync \t1;", "$L__BB0_1:", *body,
                      "\t@%p1 bra \t$L__BB0_1;", "\tret;", "}", ""])


def ring_step(before_release: list[str]) -> list[str]:
    """One consumer step: a marked wait, a wgmma, its retirement, whatever comes next, a marked release."""
    return [*MARK, "\tbar.sync \t3, 128;", *WAIT, "\twgmma.fence.sync.aligned;", "\twgmma.commit_group.sync.aligned;",
            "\twgmma.wait_group.sync.aligned 1;", *before_release, ".loc\t4 212 31", *MARK, "\tadd.s32 \t%r1, %r2, 8;",
            "\tbar.sync \t3, 128;", *ARRIVE]


def test_barriers_after_a_retired_wgmma_go():
    ptx = kernel(*ring_step([]))
    out, removed = barrier_elision.elide(ptx)
    assert removed == 2 and "bar.sync" not in out and out.count("mbarrier.arrive") == 1
    assert "barrier.sync \t1;" in out                    # the partition's own barrier stays


def test_unmarked_barriers_and_unmarked_modules_stay():
    ptx = kernel(*ring_step([])).replace(barrier_elision.MARKER, "a comment")
    assert barrier_elision.elide(ptx) == (ptx, 0)


@pytest.mark.parametrize("access", ["\tst.shared.b32 \t[%r7], %r8;", "\tld.shared.v2.b32 \t{%r7, %r8}, [%r9];",
                                    "\tstmatrix.sync.aligned.m8n8.x4.shared.b16 [%r73], {%r1, %r2, %r3, %r4};",
                                    "\tcp.async.bulk.wait_group.read 0;"])
def test_a_shared_memory_access_before_the_release_is_refused(access):
    """Another warp may still be at that access when thread 0 releases the buffer: the mark is wrong."""
    with pytest.raises(TlxCompileError, match=r"warpgroup_sync=False\) at line 212: .*shared-memory access"):
        barrier_elision.elide(kernel(*ring_step([access])))


def test_a_wait_with_no_retired_wgmma_after_it_is_refused():
    """A warp could still be before that wait when the release lets its barrier move on twice."""
    with pytest.raises(TlxCompileError, match="mbarrier wait with no wgmma issued and retired after it"):
        barrier_elision.elide(kernel(*ring_step(WAIT)))


def test_a_wgmma_wait_that_retires_nothing_new_is_no_proof():
    """wait; wgmma.wait_group; release: no wgmma was issued after the wait, so nothing shows the other
    warps passed it (a pure relay must keep its barrier)."""
    body = [*MARK, "\tbar.sync \t3, 128;", *WAIT, "\twgmma.wait_group.sync.aligned 0;", *MARK,
            "\tbar.sync \t3, 128;", *ARRIVE]
    with pytest.raises(TlxCompileError, match="wgmma.wait_group with no wgmma issued since the mbarrier wait"):
        barrier_elision.elide(kernel(*body))


@pytest.mark.parametrize("pending,refused", [(0, False), (1, True)])
def test_a_shared_access_needs_a_later_wgmma_retired(pending, refused):
    """ld.shared; wgmma; wait_group N; release: with N=0 that wgmma retired, so every warp is past the
    load; with N=1 it may still be in flight and a warp may still be loading."""
    body = [*MARK, "	bar.sync 	3, 128;", *WAIT, "	ld.shared.b32 	%r7, [%r9];", "	wgmma.commit_group.sync.aligned;",
            f"	wgmma.wait_group.sync.aligned {pending};", ".loc	4 212 31", *MARK, "	bar.sync 	3, 128;", *ARRIVE]
    if refused:
        with pytest.raises(TlxCompileError, match="shared-memory access with no wgmma issued after it and retired"):
            barrier_elision.elide(kernel(*body))
    else:
        assert barrier_elision.elide(kernel(*body))[1] == 2


def test_global_accesses_and_tma_issues_are_no_hazard():
    body = ring_step(["\tst.global.v4.b32 \t[%rd1], {%r1, %r2, %r3, %r4};",
                      "\t@%p16 cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%rd1, {%r9, %r8}], [%r7];",
                      "\tcp.async.bulk.commit_group;"])
    assert barrier_elision.elide(kernel(*body))[1] == 2


def test_the_loop_back_edge_is_walked():
    """The wait at the loop top looks back over the previous step's release to its retired wgmma; on the
    way in, to the partition's barrier. A shared store on the back edge blocks it."""
    body = ring_step([])
    assert barrier_elision.elide(kernel(*body))[1] == 2
    tail = "\tst.shared.b32 \t[%r7], %r8;"
    with pytest.raises(TlxCompileError):
        barrier_elision.elide(kernel(*body, tail))


def test_a_dead_label_block_is_no_path():
    """A label right after an unconditional branch that no branch names (LLVM's debug-line `$L__tmp`
    labels; the LEAN_SYNC persistent GEMM with a gelu epilogue has one before its last release) starts
    a block that nothing runs: the walk back skips it instead of reporting the function's start."""
    ptx = "\n".join([".visible .entry k(", ")", "{", "\tbarrier.sync \t1;", "$L__BB0_1:", *ring_step([]),
                     "\t@%p3 bra \t$L__BB0_8;", "\t@%p1 bra \t$L__BB0_1;", "\tbra.uni \t$L__BB0_9;", "$L__tmp3:",
                     "$L__BB0_8:", "\twgmma.wait_group.sync.aligned 0;", *MARK, "\tbar.sync \t3, 128;", *ARRIVE,
                     "$L__BB0_9:", "\tret;", "}", ""])
    assert barrier_elision.elide(ptx)[1] == 3
    reachable = ptx.replace("{\n", "{\n\t@%p4 bra \t$L__tmp3;\n")      # a branch from the entry names it
    table = ptx.replace("{\n", "{\n\tbrx.idx \t%r5, $L__tbl;\n")           # a branch table might
    for refused in (reachable, table):
        with pytest.raises(TlxCompileError, match="the start of the function"):
            barrier_elision.elide(refused)


def test_tma_load_marks_need_a_barrier_over_single_thread_issues_only():
    """A one-partition refill: barrier, expect, load A, load B. Membar's barriers before the two loads
    order nothing the first one did not; a wait or a wgmma between is refused (a retired wgmma proves
    nothing for a TMA load's slot, nor for warps of another warp group)."""
    refill = ["\tbar.sync \t0;", *EXPECT, *MARK, "\tbar.sync \t0;", *TMA_LOAD, *MARK, "\tbar.sync \t0;", *TMA_LOAD]
    out, removed = barrier_elision.elide(kernel(*refill))
    assert removed == 2 and out.count("bar.sync") == 1 and out.count("cp.async.bulk.tensor") == 2
    with pytest.raises(TlxCompileError, match="before any barrier"):
        barrier_elision.elide(kernel("\tbar.sync \t0;", *WAIT, *MARK, "\tbar.sync \t0;", *TMA_LOAD))


def test_a_mark_beyond_one_warp_group_needs_a_barrier_proof():
    """The ring step's wgmma proof holds within one warp group only: with the barrier-proof-only marker
    (what a mark in an 8-warp region emits) the same code is refused."""
    assert barrier_elision.elide(kernel(*ring_step([])))[1] == 2
    strict = "\n".join(ring_step([])).replace(barrier_elision.MARKER, f"{barrier_elision.MARKER} "
                                               f"{barrier_elision.BARRIER_PROOF_ONLY}").split("\n")
    with pytest.raises(TlxCompileError, match="before any barrier"):
        barrier_elision.elide(kernel(*strict))


def _pipelined_loop_barriers(lean: bool) -> int:
    a, b = torch.randn(4096, 4096, dtype=torch.bfloat16), torch.randn(4096, 4096, dtype=torch.bfloat16)
    cfg = gemm.Config("pipelined", 128, 256, 64, 3, 8, 8, LEAN_SYNC=lean)
    args, _, meta = gemm.launch_args(a, b, torch.empty(4096, 4096, dtype=torch.bfloat16), cfg)
    report = tlx.compile(gemm.KERNELS[cfg.kernel], *args, num_warps=cfg.num_warps, **meta)
    assert report.stats["spills"] == 0 and not report.stats["wgmma_serialized"]
    ptx = report.asm["ptx"]
    loop = ptx[ptx.index("Inner Loop Header"):]
    return loop[:loop.index("wgmma.wait_group.sync.aligned 0")].count("bar.sync")


def test_lean_pipelined_gemm_keeps_one_barrier_per_k_step():
    assert (_pipelined_loop_barriers(False), _pipelined_loop_barriers(True)) == (4, 1)


def _gemm_report(cfg):
    a, b = torch.randn(512, 256, dtype=torch.float16), torch.randn(256, 512, dtype=torch.float16)
    c = torch.empty(512, 512, dtype=torch.float16)
    args, _, meta = gemm.launch_args(a, b, c, cfg)
    return tlx.compile(gemm.KERNELS[cfg.kernel], *args, num_warps=cfg.num_warps, **meta)


@pytest.mark.parametrize("cfg", [gemm.Config("persistent", 128, 256, 64, 3, 16, NO_ZERO_FILL=True),
                                 gemm.Config("pingpong", 128, 128, 64, 5, PIN_PROLOGUE=True, NO_ZERO_FILL=True)])
def test_lean_gemm_consumers_keep_no_barrier_in_their_k_loop(cfg):
    plain, lean = _gemm_report(cfg), _gemm_report(replace(cfg, LEAN_SYNC=True))
    assert lean.stats["named_barrier"] <= plain.stats["named_barrier"] - 4, (plain.stats, lean.stats)
    assert lean.stats["spills"] == 0 and not lean.stats["wgmma_serialized"] and not lean.stats["wgmma_desc_unset"]
    ptx = lean.asm["ptx"]
    loop = ptx[ptx.index("wgmma.wait_group.sync.aligned 1"):]
    assert "bar.sync" not in loop[:loop.index("mbarrier.arrive") + 400].split("wgmma.wait_group.sync.aligned 1")[0]


@pytest.mark.parametrize("act", ["gelu", "silu"])
def test_lean_gemm_compiles_with_every_epilogue(act):
    """The gelu epilogue's PTX put a dead `$L__tmp` label block before the last stage release; the walk
    back took it for the function's start and refused the LEAN_SYNC build (GPU test run 14). With an
    activation as without one, LEAN_SYNC compiles and drops the same number of barriers."""
    a, b = torch.randn(512, 256, dtype=torch.bfloat16), torch.randn(256, 512, dtype=torch.bfloat16)
    c = torch.empty(512, 512, dtype=torch.bfloat16)
    cfg = gemm.Config("persistent", 128, 256, 64, 3, 16, NO_ZERO_FILL=True)

    def dropped(activation):
        counts = []
        for lean in (False, True):
            args, _, meta = gemm.launch_args(a, b, c, replace(cfg, LEAN_SYNC=lean), None, activation)
            counts.append(tlx.compile(gemm.KERNELS[cfg.kernel], *args, num_warps=cfg.num_warps,
                                      **meta).stats["named_barrier"])
        return counts[0] - counts[1]

    assert dropped(act) == dropped(None) >= 4


@pytest.mark.parametrize("D,S,causal", [(128, 4096, False), (64, 1024, True), (256, 4096, False)])
def test_lean_attention_defaults_compile_with_fewer_barriers(D, S, causal):
    def report(cfg):
        q, k, v = (torch.randn(1, 2, 512, D, dtype=torch.bfloat16) for _ in range(3))
        o, lse = torch.empty_like(q), torch.empty(1, 2, 512)
        args, _, meta, _ = attention.launch_args(q, k, v, o, lse, D ** -0.5, "bhsd", cfg,
                                                 attention.Features(causal=causal))
        return tlx.compile(attention.attention_fwd_kernel, *args, num_warps=4, **meta).stats
    cfg = attention.default_config(D, S, causal)
    plain, lean = report(cfg), report(replace(cfg, LEAN_SYNC=True))
    assert lean["named_barrier"] < plain["named_barrier"] and lean["spills"] == 0, (plain, lean)
    assert not lean["wgmma_serialized"] and not lean["wgmma_desc_unset"]


def test_lean_sync_configs_are_checked():
    with pytest.raises(attention.ConfigRejected, match="LEAN_SYNC cannot combine with PIN_WAIT or LAZY_RESCALE"):
        attention.Config(PIPELINE=True, PIN_WAIT=True, LEAN_SYNC=True)
    with pytest.raises(gemm.ConfigRejected, match="'LEAN_SYNC' is the persistent and pipelined kernels'"):
        gemm.Config("ws", 128, 128, 64, 2, LEAN_SYNC=True)
