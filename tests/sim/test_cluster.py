"""Two-CTA clusters on the simulator: CTA 0 loads each tile once and multicasts it into both CTAs'
rings; every consumer releases its slot in both CTAs (a remote arrive), since CTA 0's next multicast
overwrites the peer's slot too. The bug twins drop one piece of that protocol each."""
import pytest
import torch
import triton.language as tl

import tlx
import tlx.sim
from tlx import TensorDescriptor

from helpers import marker_line

HERE = __file__
R, C = 16, 32                      # one tile


@tlx.jit
def multicast_copy(desc, out_ptr, N_TILES: tl.constexpr, BUG: tl.constexpr, IN_TASKS: tl.constexpr = False):
    """Each CTA writes every tile it received to its own part of `out` (by program id: the interpreter's
    program id must follow whichever CTA's task runs). IN_TASKS: the cluster barriers open and close every
    task instead of the region (the form a GPU lowering emits without touching the workers' entry)."""
    rank = tlx.cluster_cta_rank()
    bufs = tlx.local_alloc((R, C), tl.float32, 2)
    full = tlx.alloc_barriers(2)
    empty = tlx.alloc_barriers(2, arrive_count=1 if BUG in (3, 4) else 2)   # both CTAs' consumers release a slot
    if BUG != 1 and not IN_TASKS:
        tlx.cluster_barrier()                     # the peer's barriers exist before anything reaches them
    with tlx.async_tasks():
        with tlx.async_task("default"):           # producer
            if IN_TASKS:
                tlx.cluster_barrier()
            for t in range(N_TILES):
                s, p = tlx.warp_spec.get_bufidx_phase(t, 2)
                tlx.barrier_wait(empty[s], p ^ 1)  # BUG:skipped
                tlx.barrier_expect_bytes(full[s], R * C * 4)
                if rank == 0:
                    tlx.async_descriptor_load(desc, bufs[s], [t * R, 0], full[s],  # BUG:entry
                                              multicast_targets=[0, 1])
            if IN_TASKS:
                tlx.cluster_barrier()
        with tlx.async_task(num_warps=4):         # consumer
            if IN_TASKS:
                tlx.cluster_barrier()
            offs = tl.arange(0, R)[:, None] * C + tl.arange(0, C)[None, :]
            for t in range(N_TILES):
                s, p = tlx.warp_spec.get_bufidx_phase(t, 2)
                tlx.barrier_wait(full[s], p)
                tile = tlx.local_load(bufs[s])
                tl.store(out_ptr + (tl.program_id(0) * N_TILES + t) * R * C + offs, tile)
                tlx.barrier_arrive(empty[s])
                if BUG != 3:
                    tlx.barrier_arrive(empty[s], remote_cta_rank=1 - rank)
            if IN_TASKS:
                tlx.cluster_barrier()
    if BUG != 2 and not IN_TASKS:
        tlx.cluster_barrier()                     # no CTA leaves while the other may still arrive on it


def run(bug, n_tiles=4, clusters=1, in_tasks=False, **options):
    x = torch.randn(n_tiles * R, C)
    out = torch.full((clusters * 2 * n_tiles * R, C), float("nan"))
    report = multicast_copy[(2 * clusters,)](TensorDescriptor.from_tensor(x, [R, C]), out, n_tiles, BUG=bug,
                                             IN_TASKS=in_tasks, ctas_per_cga=(2, 1, 1), backend="sim",
                                             sim_options=tlx.sim.SimOptions(**options))
    return x, out, report


@pytest.mark.parametrize("in_tasks", [False, True], ids=["trunk-barriers", "task-barriers"])
def test_multicast_ring_is_clean_under_many_schedules(in_tasks):
    x, out, report = run(0, clusters=2, in_tasks=in_tasks, schedules=6)
    assert report.ok
    for cta in range(4):                                   # both CTAs of both clusters got every tile
        assert torch.equal(out[cta * 4 * R:(cta + 1) * 4 * R], x), cta


def test_cluster_rank_and_size_follow_the_launch():
    @tlx.jit
    def ranks(out_ptr):
        pid = tl.program_id(0)
        tl.store(out_ptr + pid * 2, tlx.cluster_cta_rank())
        tl.store(out_ptr + pid * 2 + 1, tlx.cluster_size_1d())
    out = torch.full((8,), -1, dtype=torch.int32)
    ranks[(4,)](out, ctas_per_cga=(2, 1, 1), backend="sim")
    assert out.tolist() == [0, 2, 1, 2, 0, 2, 1, 2]
    ranks[(4,)](out, backend="sim")
    assert out.tolist() == [0, 1] * 4


def test_missing_entry_barrier_is_reported():
    """Without the cluster barrier after allocation nothing orders CTA 1's barriers before CTA 0's
    multicast reaches them."""
    with pytest.raises(tlx.sim.ClusterProtocolError) as info:
        run(1)
    err = info.value
    assert err.op == "async_descriptor_load" and err.line == marker_line(HERE, "entry"), str(err)
    assert err.program_id == (0, 0, 0) and "in CTA 1" in err.summary and "cluster_barrier" in err.summary


def test_missing_exit_barrier_is_reported():
    """A CTA that leaves first frees the shared memory its peer still arrives on; some schedules show it."""
    _, _, report = run(2, schedules=8, collect_all=True)
    assert not report.ok
    assert any(isinstance(e, tlx.sim.ClusterProtocolError) and "already exited" in str(e) for e in report.errors)


def test_local_only_release_lets_the_multicast_overwrite_a_slot_in_use():
    """CTA 0 refills both CTAs' slot once its own consumer released it: CTA 1's may still read it."""
    _, _, report = run(3, schedules=8, collect_all=True)
    races = [e for e in report.errors if isinstance(e, tlx.sim.OverwriteBeforeReleaseError)
             and e.other is not None and e.other.program_id == (1, 0, 0) and e.other.op == "local_load"]
    assert races and races[0].program_id == (0, 0, 0), report.render()


def test_arrive_count_that_leaves_out_the_peer_is_named():
    """arrive_count=1 with both CTAs' consumers arriving: each round completes two phases, so the producer's
    parity wait misses one (MissedPhaseError at its wait) and, before that, refills a slot the peer still
    reads; both reports name the barrier's arriving tasks against its arrive_count (the race's report only
    once both tasks have arrived on it: before that nothing shows the count is short)."""
    _, _, report = run(4, schedules=4, collect_all=True)
    hint = "has arrive_count 1 but 2 tasks arrive on it (CTA 0 task 1 replica 0, CTA 1 task 1 replica 0)"
    missed = [e for e in report.errors if isinstance(e, tlx.sim.MissedPhaseError)]
    assert missed, report.render()
    err = missed[0]
    assert err.op == "barrier_wait" and err.line == marker_line(HERE, "skipped"), str(err)
    assert err.target.startswith("empty[") and "completed 2 phases" in err.summary and hint in err.details
    races = [e for e in report.errors if isinstance(e, tlx.sim.OverwriteBeforeReleaseError)]
    assert any(hint.split(" (")[0] in e.details for e in races), report.render()   # once both have arrived


def test_cluster_barrier_in_one_task_only_never_completes():
    """The other task's warps never arrive (they wait at the region's end): a deadlock, as on the GPU."""
    @tlx.jit
    def barrier_in_task(out_ptr):
        with tlx.async_tasks():
            with tlx.async_task("default"):
                tlx.cluster_barrier()
            with tlx.async_task(num_warps=4):
                tl.store(out_ptr + tl.arange(0, 4), tl.zeros((4,), tl.float32))
    with pytest.raises(tlx.sim.DeadlockError, match="cluster_barrier"):
        barrier_in_task[(2,)](torch.zeros(4), ctas_per_cga=(2, 1, 1), backend="sim")


def test_bad_cluster_launches_are_refused():
    with pytest.raises(tlx.TlxLaunchError, match=r"grid \(3, 1, 1\) must be a multiple of ctas_per_cga"):
        run_grid = multicast_copy[(3,)]
        run_grid(TensorDescriptor.from_tensor(torch.zeros(R, C), [R, C]), torch.zeros(1), 1, BUG=0,
                 ctas_per_cga=(2, 1, 1), backend="sim")
    with pytest.raises(tlx.TlxLaunchError, match=r"'ctas_per_cga' on the GPU must be \(n, 1, 1\) .*got \(1, 2, 1\)"):
        multicast_copy[(2,)](TensorDescriptor.from_tensor(torch.zeros(R, C), [R, C]), torch.zeros(1), 1, BUG=0,
                             ctas_per_cga=(1, 2, 1), backend="gluon")
