"""Seeded protocol bugs: each must raise its ProtocolError subclass at the marked line, and its
correct twin (BUG=0) must pass. Markers `# BUG:<tag>` name the line the report must point at."""
import pytest
import torch
import triton.language as tl

import tlx
import tlx.sim
from helpers import gemm_operands, marker_line
from tlx import TensorDescriptor

HERE = __file__
R, C = 64, 64


@tlx.jit
def ring_copy(x_desc, out_ptr, n_tiles, BUG: tl.constexpr, S: tl.constexpr = 2):
    """A TMA producer fills a ring of S tiles; a consumer task copies each tile to `out`."""
    bufs = tlx.local_alloc((64, 64), tl.float16, S)
    full = tlx.alloc_barriers(S)
    empty = tlx.alloc_barriers(S)
    with tlx.async_tasks():
        with tlx.async_task("default"):
            for t in range(n_tiles):
                s, p = tlx.warp_spec.get_bufidx_phase(t, S)
                if BUG == 1:
                    tlx.barrier_wait(empty[s], p)  # BUG:deadlock
                elif BUG != 3:   # BUG 3 refills the slot without waiting for its release
                    tlx.barrier_wait(empty[s], p ^ 1)
                nbytes = 64 * 64 * 2 if BUG != 4 else 64 * 64
                tlx.barrier_expect_bytes(full[s], nbytes)  # BUG:expect
                tlx.async_descriptor_load(x_desc, bufs[s], [t * 64, 0], full[s])  # BUG:overwrite
        with tlx.async_task(num_warps=4):
            offs = tl.arange(0, 64)[:, None] * 64 + tl.arange(0, 64)[None, :]
            for t in range(n_tiles):
                s, p = tlx.warp_spec.get_bufidx_phase(t, S)
                tlx.barrier_wait(full[s], p)
                idx = s + S if BUG == 7 else s
                tile = tlx.local_load(bufs[idx])  # BUG:index
                tl.store(out_ptr + t * 64 * 64 + offs, tile)
                tlx.barrier_arrive(empty[s], 2 if BUG == 5 else 1)  # BUG:arrival


@tlx.jit
def tma_then_read(x_desc, out_ptr, BUG: tl.constexpr):
    """One task: a TMA load, then a read of the slot (BUG: without waiting on the load's barrier)."""
    buf = tlx.local_alloc((64, 64), tl.float16, 1)
    bar = tlx.alloc_barriers(1)
    tlx.barrier_expect_bytes(bar[0], 64 * 64 * 2)
    tlx.async_descriptor_load(x_desc, buf[0], [0, 0], bar[0])
    if BUG == 0:
        tlx.barrier_wait(bar[0], 0)
    tile = tlx.local_load(buf[0])  # BUG:read
    offs = tl.arange(0, 64)[:, None] * 64 + tl.arange(0, 64)[None, :]
    tl.store(out_ptr + offs, tile)


@tlx.jit
def dot_result_use(a_desc, b_desc, out_ptr, BUG: tl.constexpr):
    """One wgmma tile; BUG: its result is converted before async_dot_wait."""
    A = tlx.local_alloc((64, 32), tl.float16, 1)
    B = tlx.local_alloc((32, 64), tl.float16, 1)
    bar = tlx.alloc_barriers(1)
    tlx.barrier_expect_bytes(bar[0], (64 * 32 + 32 * 64) * 2)
    tlx.async_descriptor_load(a_desc, A[0], [0, 0], bar[0])
    tlx.async_descriptor_load(b_desc, B[0], [0, 0], bar[0])
    tlx.barrier_wait(bar[0], 0)
    acc = tlx.async_dot(A[0], B[0], tl.zeros((64, 64), dtype=tl.float32))
    if BUG == 0:
        acc = tlx.async_dot_wait(0, acc)
    c = acc.to(tl.float16)  # BUG:dot-use
    offs = tl.arange(0, 64)[:, None] * 64 + tl.arange(0, 64)[None, :]
    tl.store(out_ptr + offs, c)


@tlx.jit
def dot_release(a_desc, b_desc, out_ptr, K, BUG: tl.constexpr, MARK: tl.constexpr = False,
                SYNCED: tl.constexpr = False):
    """A producer refills one A/B slot per k step; the consumer waits, multiplies and releases it.
    BUG 1: released before its dot is done. MARK: the wait and the release are marked warpgroup_sync=False
    (no warp-group barrier); BUG 2: the consumer then reads the slot itself after the dot retired, so
    another warp may still read it when the slot is handed back; BUG 3: it hands the slot back with no
    dot at all, so another warp may still be before the wait when the producer refills the slot.
    SYNCED (BUG 2's twin): the release keeps its bar.sync and a marked arrive on a spare barrier follows it,
    as CLUSTER=2's remote arrive follows the local one (release_in_cluster)."""
    A = tlx.local_alloc((64, 32), tl.float16, 1)
    B = tlx.local_alloc((32, 64), tl.float16, 1)
    full = tlx.alloc_barriers(1)
    empty = tlx.alloc_barriers(1)
    spare = tlx.alloc_barriers(1)
    with tlx.async_tasks():
        with tlx.async_task("default"):
            for k in range(K // 32):
                tlx.barrier_wait(empty[0], (k & 1) ^ 1)
                tlx.barrier_expect_bytes(full[0], (64 * 32 + 32 * 64) * 2)
                tlx.async_descriptor_load(a_desc, A[0], [0, k * 32], full[0])
                tlx.async_descriptor_load(b_desc, B[0], [k * 32, 0], full[0])
        with tlx.async_task(num_warps=4):
            acc = tl.zeros((64, 64), dtype=tl.float32)
            for k in range(K // 32):
                if BUG == 3:
                    tlx.barrier_wait(full[0], k & 1)
                    tlx.barrier_arrive(empty[0], warpgroup_sync=False)  # BUG:wg-lag
                    continue
                tlx.barrier_wait(full[0], k & 1, warpgroup_sync=not MARK)
                acc = tlx.async_dot(A[0], B[0], acc)
                if BUG == 1:
                    tlx.barrier_arrive(empty[0])  # BUG:dot-release
                    acc = tlx.async_dot_wait(0, acc)
                else:
                    acc = tlx.async_dot_wait(0, acc)
                    if BUG == 2:
                        a_tile = tlx.local_load(A[0])
                    if SYNCED:
                        tlx.barrier_arrive(empty[0])
                        tlx.barrier_arrive(spare[0], warpgroup_sync=False)
                    else:
                        tlx.barrier_arrive(empty[0], warpgroup_sync=not MARK)  # BUG:wg-sync
            offs = tl.arange(0, 64)[:, None] * 64 + tl.arange(0, 64)[None, :]
            tl.store(out_ptr + offs, acc)


@tlx.jit
def shared_ring(x_desc, out_ptr, n_tiles, RELEASERS: tl.constexpr, S: tl.constexpr = 2):
    """Two consumer replicas read every tile and both release it; `empty` counts RELEASERS arrivals
    (BUG: 1, so the first release completes the phase while the other replica may still read)."""
    bufs = tlx.local_alloc((64, 64), tl.float16, S)
    full = tlx.alloc_barriers(S, arrive_count=1)
    empty = tlx.alloc_barriers(S, arrive_count=RELEASERS)
    with tlx.async_tasks():
        with tlx.async_task("default"):
            for t in range(n_tiles):
                s, p = tlx.warp_spec.get_bufidx_phase(t, S)
                tlx.barrier_wait(empty[s], p ^ 1)
                tlx.barrier_expect_bytes(full[s], 64 * 64 * 2)
                tlx.async_descriptor_load(x_desc, bufs[s], [t * 64, 0], full[s])  # BUG:shared-overwrite
        with tlx.async_task(num_warps=4, replicate=2):
            copy = out_ptr + tlx.async_task_replica_id() * n_tiles * 64 * 64   # each replica its own copy
            offs = tl.arange(0, 64)[:, None] * 64 + tl.arange(0, 64)[None, :]
            for t in range(n_tiles):
                s, p = tlx.warp_spec.get_bufidx_phase(t, S)
                tlx.barrier_wait(full[s], p)
                tile = tlx.local_load(bufs[s])
                tl.store(copy + t * 64 * 64 + offs, tile)
                tlx.barrier_arrive(empty[s])


def _ring_args(n_tiles=4):
    x = torch.randn(n_tiles * R, C).to(torch.float16)
    out = torch.full((n_tiles * R, C), float("nan"), dtype=torch.float16)
    return x, out, (TensorDescriptor.from_tensor(x, [R, C]), out, n_tiles)


def run_ring(bug, **options):
    x, out, args = _ring_args()
    report = ring_copy[(1,)](*args, BUG=bug, backend="sim", sim_options=tlx.sim.SimOptions(**options))
    return x, out, report


def run_tma_then_read(bug):
    x = torch.randn(R, C).to(torch.float16)
    out = torch.full((R, C), float("nan"), dtype=torch.float16)
    tma_then_read[(1,)](TensorDescriptor.from_tensor(x, [R, C]), out, BUG=bug, backend="sim")
    return x, out


def run_dot(kernel, bug, K=32, **meta):
    a, b, _, (ad, bd, _) = gemm_operands(64, 64, K, [64, 32], [32, 64], [64, 64])
    out = torch.full((64, 64), float("nan"), dtype=torch.float32)
    extra = (K,) if kernel is dot_release else ()
    kernel[(1,)](ad, bd, out, *extra, BUG=bug, backend="sim", **meta)
    return (a.double() @ b.double()), out


RING_CASES = [   # (BUG, expected error, marker)
    (1, tlx.sim.DeadlockError, "deadlock"),
    (3, tlx.sim.OverwriteBeforeReleaseError, "overwrite"),
    (4, tlx.sim.ExpectBytesError, "expect"),
    (5, tlx.sim.ExtraArrivalError, "arrival"),
    (7, tlx.sim.IndexOutOfRangeError, "index"),
]


def assert_report(err: tlx.sim.ProtocolError, cls, marker: str, kernel: str):
    assert type(err) is cls, f"expected {cls.__name__}, got {type(err).__name__}: {err}"
    assert err.file == HERE and err.line == marker_line(HERE, marker), str(err)
    assert err.kernel == kernel and err.program_id == (0, 0, 0)
    assert f"{HERE}:{err.line}" in str(err)


@pytest.mark.parametrize("bug,cls,marker", RING_CASES, ids=[c[2] for c in RING_CASES])
def test_ring_bug_is_reported_at_its_line(bug, cls, marker):
    with pytest.raises(cls) as info:
        run_ring(bug)
    assert_report(info.value, cls, marker, "ring_copy")


def test_ring_twin_is_clean_under_many_schedules():
    x, out, report = run_ring(0, schedules=8)
    assert report.ok and torch.equal(out, x)


def run_shared_ring(releasers, **options):
    x = torch.randn(4 * R, C).to(torch.float16)
    out = torch.full((2, 4 * R, C), float("nan"), dtype=torch.float16)
    report = shared_ring[(1,)](TensorDescriptor.from_tensor(x, [R, C]), out, 4, RELEASERS=releasers,
                               backend="sim", sim_options=tlx.sim.SimOptions(**options))
    return x, out, report


def test_release_left_out_of_arrive_count_is_named_in_the_first_round():
    """One replica's release completes the phase and the producer refills the slot the other still reads.
    Every such race names the barrier's count: once both replicas have arrived on it, by the two arriving
    tasks; in the first round, before the second has, by the phase's arrivals and the reader not among them."""
    _, _, report = run_shared_ring(1, schedules=4, collect_all=True)
    races = [e for e in report.errors if isinstance(e, tlx.sim.OverwriteBeforeReleaseError)]
    assert races, report.render()
    for err in races:
        assert err.line == marker_line(HERE, "shared-overwrite") and "arrive_count 1" in err.details, str(err)
    first_round = [e for e in races if "was not among them" in e.details]
    assert first_round, report.render()
    err = first_round[0]
    reader = err.other.replica
    assert err.other.op == "local_load" and err.other.task == 1
    assert (f"task 0 replica 0 waited on empty[0], whose phase completed with arrivals from task 1 replica "
            f"{1 - reader} (arrive_count 1); task 1 replica {reader} read the buffer but was not among them"
            in err.details), str(err)


def test_shared_ring_twin_is_clean():
    x, out, report = run_shared_ring(2, schedules=8)
    assert report.ok and torch.equal(out[0], x) and torch.equal(out[1], x)


def test_deadlock_report_lists_each_wait():
    with pytest.raises(tlx.sim.DeadlockError) as info:
        run_ring(1)
    err = info.value
    assert err.task == 0 and len(err.waits) == 2
    assert "barrier_wait(empty[0], parity 0)" in err.waits[0] and "arrivals 0/1" in err.waits[0]
    assert "barrier_wait(full[0], parity 0)" in err.waits[1] and "tx bytes 0/0" in err.waits[1]


def test_read_before_wait():
    with pytest.raises(tlx.sim.ReadBeforeWaitError) as info:
        run_tma_then_read(1)
    assert_report(info.value, tlx.sim.ReadBeforeWaitError, "read", "tma_then_read")
    assert info.value.target == "buf" and info.value.slot == 0
    x, out = run_tma_then_read(0)
    assert torch.equal(out, x)


def test_async_dot_result_used_before_wait():
    with pytest.raises(tlx.sim.AsyncDotError) as info:
        run_dot(dot_result_use, 1)
    assert_report(info.value, tlx.sim.AsyncDotError, "dot-use", "dot_result_use")
    ref, out = run_dot(dot_result_use, 0)
    assert ((out.double() - ref).abs().max() / ref.abs().max()) <= 1e-2


def test_async_dot_operand_released_before_wait():
    with pytest.raises(tlx.sim.AsyncDotError) as info:
        run_dot(dot_release, 1, K=96)
    assert_report(info.value, tlx.sim.AsyncDotError, "dot-release", "dot_release")
    assert info.value.task == 1 and info.value.target == "A"
    ref, out = run_dot(dot_release, 0, K=96)
    assert ((out.double() - ref).abs().max() / ref.abs().max()) <= 1e-2


def test_warpgroup_sync_mark_after_own_shared_read():
    with pytest.raises(tlx.sim.WarpgroupSyncError) as info:
        run_dot(dot_release, 2, K=96, MARK=True)
    assert_report(info.value, tlx.sim.WarpgroupSyncError, "wg-sync", "dot_release")
    assert "local_load(A" in str(info.value) and info.value.target.startswith("empty")
    with pytest.raises(tlx.sim.WarpgroupSyncError) as info:
        run_dot(dot_release, 3, K=96)
    assert_report(info.value, tlx.sim.WarpgroupSyncError, "wg-lag", "dot_release")
    assert "full[0] completes its next phase" in str(info.value) and "miss its phase" in str(info.value)
    ref, out = run_dot(dot_release, 0, K=96, MARK=True)     # the marks after a retired dot are right
    assert ((out.double() - ref).abs().max() / ref.abs().max()) <= 1e-2
    ref, out = run_dot(dot_release, 2, K=96, SYNCED=True)   # so is one right after an op that keeps its bar.sync
    assert ((out.double() - ref).abs().max() / ref.abs().max()) <= 1e-2


def test_same_seed_same_report_and_collect_all():
    first = [str(pytest.raises(tlx.sim.ProtocolError, run_ring, 3).value) for _ in range(2)]
    assert first[0] == first[1]
    _, _, report = run_ring(3, collect_all=True)
    assert not report.ok and all(isinstance(e, tlx.sim.OverwriteBeforeReleaseError) for e in report.errors[:1])
    assert "OverwriteBeforeReleaseError" in report.render()


@tlx.jit
def flag_handoff(flags_ptr, out_ptr, BUG: tl.constexpr):
    """Program p publishes its id through flags[p] and reads program p-1's (a stream-K style hand-off);
    BUG=1 waits on the next program's flag instead: with programs in order, nothing ever sets it."""
    pid = tl.program_id(0)
    tl.atomic_xchg(flags_ptr + pid, pid + 1, sem="release", scope="gpu")
    if pid > 0:
        other = pid + 1 if BUG == 1 else pid - 1
        while tl.atomic_add(flags_ptr + other, 0, sem="acquire", scope="gpu") == 0:  # BUG:spin
            pass
        tl.store(out_ptr + pid, tl.atomic_add(flags_ptr + other, 0, sem="acquire", scope="gpu"))


def test_spin_on_a_later_program_is_a_livelock_not_a_hang():
    flags, out = torch.zeros(5, dtype=torch.int32), torch.zeros(5, dtype=torch.int32)
    flag_handoff[(4,)](flags, out, BUG=0, backend="sim")
    assert out.tolist() == [0, 1, 2, 3, 0]
    flags.zero_()
    with pytest.raises(tlx.sim.LivelockError) as info:
        flag_handoff[(4,)](flags, out, BUG=1, backend="sim")
    assert info.value.line == marker_line(HERE, "spin") and "spin-wait" in str(info.value)


@tlx.jit
def scaled_copy(x_ptr, out_ptr, n, BUG: tl.constexpr, BLOCK: tl.constexpr = 64):
    """out[i] = 2 x[i] for i < n, in blocks; BUG=1 drops the store's mask, so the last block writes past
    the end of `out` (on the GPU: someone else's memory; on the CPU: a crash without the check)."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    keep = offs < n
    x = tl.load(x_ptr + offs, mask=keep, other=0.0)      # masked-off lanes past the end are never checked
    if BUG == 1:
        tl.store(out_ptr + offs, x * 2)  # BUG:bounds
    else:
        tl.store(out_ptr + offs, x * 2, mask=keep)


def test_store_past_the_end_is_reported_with_the_tensor_it_missed():
    x = torch.randn(100)
    out = torch.full((100,), float("nan"))
    scaled_copy[(2,)](x, out, 100, BUG=0, backend="sim")
    assert torch.equal(out, x * 2)
    with pytest.raises(tlx.sim.GlobalBoundsError) as info:
        scaled_copy[(2,)](x, out, 100, BUG=1, backend="sim")
    e = info.value
    assert e.line == marker_line(HERE, "bounds") and e.program_id == (1, 0, 0)
    assert "'out_ptr' (400 bytes), 0 bytes past its end" in str(e) and "28 of 64 unmasked lanes" in str(e)
