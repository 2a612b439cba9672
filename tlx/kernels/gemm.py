"""Hopper GEMM written in the TLX surface: C[M, N] = A[M, K] @ B[K, N] (fp16/bf16 in, fp32 accumulate).

Kernels behind one host wrapper (`matmul`), a table (`default_config`) picks one per shape:
- `matmul_persistent_kernel`: persistent, warp-specialized, cooperative: a TMA producer task and two
  consumer warp groups that each own half of every 128-row tile. With `Config.STREAM_K` the last
  wave's tiles are split by K steps over every program (stream-K) and finished through an fp32
  workspace and global flags. With `Config.CLUSTER=2` two-CTA clusters share B's tile by TMA
  multicast (checked on the simulator and on an H100, where it ran at parity with CLUSTER=1; no default
  uses it).
- `matmul_pingpong_kernel`: persistent, warp-specialized; the consumers own whole tiles, alternately.
- `matmul_ws_kernel`: warp-specialized, one tile per program (the TLX_API.md example).
- `matmul_pipelined_kernel`: no warp specialization; a STAGES-deep TMA ring issued ahead of the
  wgmma loop. With `Config.SPLIT_K != 1` it computes one K slice per program into fp32 partials and
  `splitk_reduce_kernel` sums them (with bias and activation): skinny problems then read each
  operand byte once instead of once per tile row or column.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

import triton
import triton.language as tl

import tlx
from tlx.errors import ConfigRejected
from tlx.kernels.activations import gelu, silu
from tlx.kernels.aliasing import overlapping_input
from tlx.kernels.cluster import cluster_rank, cluster_sync, release_in_cluster
from tlx.kernels.hardware import SHARED_LIMIT, num_sms
from tlx.kernels.launch_cache import LaunchCache, holding, tensor_key


@tlx.jit
def grouped_tile(pid, M, N, BM: tl.constexpr, BN: tl.constexpr, GROUP_M: tl.constexpr):
    """Tile (m, n) of program `pid` in grouped order: GROUP_M row-tiles share their B columns in L2."""
    num_pid_m = tl.cdiv(M, BM)
    num_pid_n = tl.cdiv(N, BN)
    in_group = GROUP_M * num_pid_n
    first_m = (pid // in_group) * GROUP_M
    group_size = tl.minimum(num_pid_m - first_m, GROUP_M)
    pid_m = first_m + (pid % in_group) % group_size
    pid_n = (pid % in_group) // group_size
    return pid_m * BM, pid_n * BN


@tlx.jit
def matmul_ws_kernel(a_desc, b_desc, c_desc, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
                     STAGES: tl.constexpr, GROUP_M: tl.constexpr):
    """One tile per program, written out in full as the TLX_API.md example (the persistent kernel shares
    the same producer and consumer loops as load_k_steps / mma_k_steps)."""
    off_m, off_n = grouped_tile(tl.program_id(0), M, N, BM, BN, GROUP_M)
    dtype = tlx.dtype_of(a_desc)
    c_dtype = tlx.dtype_of(c_desc)
    HALF: tl.constexpr = BM // 2
    a_bufs = tlx.local_alloc((HALF, BK), dtype, 2 * STAGES)     # slot s + STAGES * half
    b_bufs = tlx.local_alloc((BK, BN), dtype, STAGES)
    c_bufs = tlx.local_alloc((HALF, BN), c_dtype, 2)
    full_a = tlx.alloc_barriers(2 * STAGES)
    full_b = tlx.alloc_barriers(STAGES)
    empty_a = tlx.alloc_barriers(2 * STAGES)
    empty_b = tlx.alloc_barriers(STAGES, arrive_count=2)         # both consumers read each B tile
    k_tiles = tl.cdiv(K, BK)
    with tlx.async_tasks():
        with tlx.async_task("default"):                          # producer: TMA loads
            for k in range(k_tiles):
                s, p = tlx.warp_spec.get_bufidx_phase(k, STAGES)
                for h in tl.static_range(2):
                    tlx.barrier_wait(empty_a[s + STAGES * h], p ^ 1)
                    tlx.barrier_expect_bytes(full_a[s + STAGES * h], HALF * BK * tlx.size_of(dtype))
                    tlx.async_descriptor_load(a_desc, a_bufs[s + STAGES * h], [off_m + h * HALF, k * BK],
                                              full_a[s + STAGES * h])
                tlx.barrier_wait(empty_b[s], p ^ 1)
                tlx.barrier_expect_bytes(full_b[s], BK * BN * tlx.size_of(dtype))
                tlx.async_descriptor_load(b_desc, b_bufs[s], [k * BK, off_n], full_b[s])
        with tlx.async_task(num_warps=4, registers=232, replicate=2):   # consumers: wgmma
            cid = tlx.async_task_replica_id()
            acc = tl.zeros((HALF, BN), dtype=tl.float32)
            for k in range(k_tiles):
                s, p = tlx.warp_spec.get_bufidx_phase(k, STAGES)
                tlx.barrier_wait(full_a[s + STAGES * cid], p)
                tlx.barrier_wait(full_b[s], p)
                acc = tlx.async_dot(a_bufs[s + STAGES * cid], b_bufs[s], acc)
                acc = tlx.async_dot_wait(1, acc)                 # the previous wgmma has retired:
                if k > 0:                                        # release the stage it read
                    prev = (k - 1) % STAGES
                    tlx.barrier_arrive(empty_a[prev + STAGES * cid])
                    tlx.barrier_arrive(empty_b[prev])
            acc = tlx.async_dot_wait(0, acc)
            last = (k_tiles - 1) % STAGES
            tlx.barrier_arrive(empty_a[last + STAGES * cid])
            tlx.barrier_arrive(empty_b[last])
            tlx.local_store(c_bufs[cid], acc.to(c_dtype))
            tlx.fence_async_shared()
            tlx.async_descriptor_store(c_desc, c_bufs[cid], [off_m + cid * HALF, off_n])
            tlx.async_descriptor_store_wait(0)


@tlx.jit
def matmul_pipelined_kernel(a_desc, b_desc, c_desc, M, N, K, K_TILES_PER_SPLIT, C_ROWS_PER_SPLIT, BM: tl.constexpr,
                            BN: tl.constexpr, BK: tl.constexpr, STAGES: tl.constexpr, GROUP_M: tl.constexpr,
                            LEAN_SYNC: tl.constexpr = False, EPI_SPLIT: tl.constexpr = 1):
    """Split s = program_id(1) covers K tiles [s * K_TILES_PER_SPLIT, ...) and stores its tile at row
    offset s * C_ROWS_PER_SPLIT of C (one split: all of K, straight into the output; several: fp32
    partials that splitk_reduce_kernel sums). LEAN_SYNC: of the four CTA barriers per K step that the
    compiler puts around the ring's wait, expect and two loads, only the one before the expect stays
    (it orders every warp's retired wgmma k-1 before slot k-1 is refilled); the others order single-thread
    issues and an mbarrier wait, which the ring covers (warpgroup_sync=False, tlx/gluon/barrier_elision.py)."""
    off_m, off_n = grouped_tile(tl.program_id(0), M, N, BM, BN, GROUP_M)
    split = tl.program_id(1)
    k_first = split * K_TILES_PER_SPLIT
    dtype = tlx.dtype_of(a_desc)
    c_dtype = tlx.dtype_of(c_desc)
    a_bufs = tlx.local_alloc((BM, BK), dtype, STAGES)
    b_bufs = tlx.local_alloc((BK, BN), dtype, STAGES)
    c_buf = tlx.local_alloc((BM, BN // EPI_SPLIT), c_dtype, 1)
    full = tlx.alloc_barriers(STAGES)
    k_tiles = tl.minimum(tl.cdiv(K, BK) - k_first, K_TILES_PER_SPLIT)
    NBYTES: tl.constexpr = (BM * BK + BK * BN) * tlx.size_of(dtype)
    for i in tl.static_range(STAGES - 1):                        # prologue: fill STAGES-1 slots
        tlx.barrier_expect_bytes(full[i], NBYTES, pred=i < k_tiles)
        tlx.async_descriptor_load(a_desc, a_bufs[i], [off_m, (k_first + i) * BK], full[i], pred=i < k_tiles,
                                  warpgroup_sync=not LEAN_SYNC)
        tlx.async_descriptor_load(b_desc, b_bufs[i], [(k_first + i) * BK, off_n], full[i], pred=i < k_tiles,
                                  warpgroup_sync=not LEAN_SYNC)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(k_tiles):
        s, p = tlx.warp_spec.get_bufidx_phase(k, STAGES)
        tlx.barrier_wait(full[s], p, warpgroup_sync=not LEAN_SYNC)
        acc = tlx.async_dot(a_bufs[s], b_bufs[s], acc)
        acc = tlx.async_dot_wait(1, acc)                         # wgmma k-1 retired: its slot is free
        nk = k + STAGES - 1
        ns = nk % STAGES
        tlx.barrier_expect_bytes(full[ns], NBYTES, pred=nk < k_tiles)
        tlx.async_descriptor_load(a_desc, a_bufs[ns], [off_m, (k_first + nk) * BK], full[ns], pred=nk < k_tiles,
                                  warpgroup_sync=not LEAN_SYNC)
        tlx.async_descriptor_load(b_desc, b_bufs[ns], [(k_first + nk) * BK, off_n], full[ns], pred=nk < k_tiles,
                                  warpgroup_sync=not LEAN_SYNC)
    acc = tlx.async_dot_wait(0, acc)
    store_split(acc, c_desc, c_buf[0], split * C_ROWS_PER_SPLIT + off_m, off_n, BM, BN, EPI_SPLIT)
    tlx.async_descriptor_store_wait(0)


@tlx.jit
def splitk_reduce_kernel(part_ptr, out_ptr, bias_ptr, M, N, SPLITS, ROWS_PER_SPLIT, OUT_STRIDE,
                         HAS_BIAS: tl.constexpr, ACTIVATION: tl.constexpr, BLOCK_M: tl.constexpr,
                         BLOCK_N: tl.constexpr):
    """out = act(sum of the SPLITS fp32 partial tiles + bias), cast to out's dtype."""
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    off_n = tl.program_id(1) * BLOCK_N
    cols = off_n + tl.arange(0, BLOCK_N)
    mask = (rows < M)[:, None] & (cols < N)[None, :]
    offs = rows.to(tl.int64)[:, None] * N + cols[None, :]
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for s in range(SPLITS):
        acc += tl.load(part_ptr + (s * ROWS_PER_SPLIT).to(tl.int64) * N + offs, mask=mask, other=0.0)
    acc = epilogue(acc, bias_ptr, off_n, N, HAS_BIAS, ACTIVATION, BLOCK_N)
    out_offs = rows.to(tl.int64)[:, None] * OUT_STRIDE + cols[None, :]
    tl.store(out_ptr + out_offs, acc.to(out_ptr.dtype.element_ty), mask=mask)


@tlx.jit
def epilogue(acc, bias_ptr, off_n, N, HAS_BIAS: tl.constexpr, ACTIVATION: tl.constexpr, BN: tl.constexpr):
    """Bias and activation on the fp32 accumulator, in its own (wgmma) layout."""
    if HAS_BIAS:
        offs_n = off_n + tl.arange(0, BN)
        bias = tl.load(bias_ptr + offs_n, mask=offs_n < N, other=0.0)
        acc = acc + bias.to(tl.float32)[None, :]
    if ACTIVATION == "relu":
        acc = tl.maximum(acc, 0.0)
    elif ACTIVATION == "gelu":
        acc = gelu(acc)
    elif ACTIVATION == "silu":
        acc = silu(acc)
    return acc


@tlx.jit
def load_tile(desc, buf, row, col, bar, TRANSPOSED: tl.constexpr, multicast_targets=None):
    """TMA-load the operand tile at (row, col) of the logical matrix; a TRANSPOSED (column-major) operand
    is stored as its transpose, so its descriptor is addressed at (col, row)."""
    if TRANSPOSED:
        tlx.async_descriptor_load(desc, buf, [col, row], bar, multicast_targets=multicast_targets)
    else:
        tlx.async_descriptor_load(desc, buf, [row, col], bar, multicast_targets=multicast_targets)


@tlx.jit
def load_b_half(b_desc, b_buf, bar, k_row, off_n, rank, BN: tl.constexpr, BK: tl.constexpr, B_T: tl.constexpr):
    """A two-CTA cluster's B tile, as CUTLASS shares it: each CTA loads the half of its rank and multicasts
    it into the same stage of both CTAs, so each CTA's full barrier receives the whole tile and B crosses
    from L2 once per cluster."""
    PART: tl.constexpr = BN // 2
    for part in tl.static_range(2):
        if part == rank:
            if B_T:                                          # stored (BN, BK): the half is a row block
                half = tlx.local_slice(b_buf, (part * PART, 0), (PART, BK))
            else:
                half = tlx.local_slice(b_buf, (0, part * PART), (BK, PART))
            load_tile(b_desc, half, k_row, off_n + part * PART, bar, B_T, [0, 1])


@tlx.jit
def load_k_steps(a_desc, b_desc, a_bufs, b_bufs, full_a, full_b, empty_a, empty_b, off_m, off_n, kb, ke, cnt,
                 HALF: tl.constexpr, BK: tl.constexpr, BN: tl.constexpr, STAGES: tl.constexpr, A_T: tl.constexpr,
                 B_T: tl.constexpr, rank=0, CLUSTER: tl.constexpr = 1):
    """Producer: K steps [kb, ke) of tile (off_m, off_n) into the ring from use `cnt` on: A in two halves,
    one per consumer, B once for both (CLUSTER=2: each CTA loads half of B, multicast into both; empty_b
    then counts both CTAs' consumers, so neither CTA's stage is refilled while the other still reads it).
    Returns the ring count after them."""
    dtype = tlx.dtype_of(a_desc)
    for k in range(kb, ke):
        s, p = tlx.warp_spec.get_bufidx_phase(cnt, STAGES)
        for h in tl.static_range(2):
            tlx.barrier_wait(empty_a[s + STAGES * h], p ^ 1)
            tlx.barrier_expect_bytes(full_a[s + STAGES * h], HALF * BK * tlx.size_of(dtype))
            load_tile(a_desc, a_bufs[s + STAGES * h], off_m + h * HALF, k * BK, full_a[s + STAGES * h], A_T)
        tlx.barrier_wait(empty_b[s], p ^ 1)
        tlx.barrier_expect_bytes(full_b[s], BK * BN * tlx.size_of(dtype))
        if CLUSTER > 1:
            load_b_half(b_desc, b_bufs[s], full_b[s], k * BK, off_n, rank, BN, BK, B_T)
        else:
            load_tile(b_desc, b_bufs[s], k * BK, off_n, full_b[s], B_T)
        cnt += 1
    return cnt


@tlx.jit
def release_stage(empty_a, empty_b, s, cid, rank, STAGES: tl.constexpr, LEAN_SYNC: tl.constexpr,
                  CLUSTER: tl.constexpr):
    """Consumer `cid` is done with ring stage s: its A half, and B (in both CTAs of a cluster, whose other
    producer multicasts into it too)."""
    tlx.barrier_arrive(empty_a[s + STAGES * cid], warpgroup_sync=not LEAN_SYNC)
    release_in_cluster(empty_b[s], rank, LEAN_SYNC, CLUSTER)


@tlx.jit
def mma_k_steps(a_bufs, b_bufs, full_a, full_b, empty_a, empty_b, acc, kb, ke, k_fresh, cnt, cid,
                STAGES: tl.constexpr, A_T: tl.constexpr, B_T: tl.constexpr, NO_ZERO_FILL: tl.constexpr,
                LEAN_SYNC: tl.constexpr, rank=0, CLUSTER: tl.constexpr = 1):
    """Consumer `cid`: acc (+)= its half of A times B over K steps [kb, ke), ring use `cnt` on, one wgmma
    kept in flight; every stage released once its wgmma retired. NO_ZERO_FILL: step k_fresh ignores
    acc (kb, or none when acc holds partial sums to continue). LEAN_SYNC: no warp-group bar.sync
    before the waits and releases (only retired wgmmas read the ring: barrier_arrive's warpgroup_sync).
    CLUSTER=2: a B stage is released in both CTAs (the other CTA's producer multicasts into it too)."""
    for k in range(kb, ke):
        s, p = tlx.warp_spec.get_bufidx_phase(cnt, STAGES)
        tlx.barrier_wait(full_a[s + STAGES * cid], p, warpgroup_sync=not LEAN_SYNC)
        tlx.barrier_wait(full_b[s], p)
        a_op = tlx.local_trans(a_bufs[s + STAGES * cid]) if A_T else a_bufs[s + STAGES * cid]
        b_op = tlx.local_trans(b_bufs[s]) if B_T else b_bufs[s]
        acc = tlx.async_dot(a_op, b_op, acc, use_acc=k != k_fresh if NO_ZERO_FILL else None)
        acc = tlx.async_dot_wait(1, acc)
        if k > kb:                                                   # wgmma cnt-1 retired
            release_stage(empty_a, empty_b, (cnt - 1) % STAGES, cid, rank, STAGES, LEAN_SYNC, CLUSTER)
        cnt += 1
    acc = tlx.async_dot_wait(0, acc)
    release_stage(empty_a, empty_b, (cnt - 1) % STAGES, cid, rank, STAGES, LEAN_SYNC, CLUSTER)
    return acc, cnt


@tlx.jit
def store_chunk(chunk, c_desc, c_buf, row, col):
    """One chunk of a tile through staging buffer `c_buf`, once the store before it has read the buffer;
    the TMA store is left running."""
    tlx.async_descriptor_store_wait(0)
    tlx.local_store(c_buf, chunk.to(tlx.dtype_of(c_desc)))
    tlx.fence_async_shared()
    tlx.async_descriptor_store(c_desc, c_buf, [row, col])


@tlx.jit
def column_halves(x, ROWS: tl.constexpr, COLS: tl.constexpr):
    """x[:, :COLS/2] and x[:, COLS/2:] (register tensors have no slicing: split a trailing axis of 2)."""
    return x.reshape(ROWS, 2, COLS // 2).permute(0, 2, 1).split()


@tlx.jit
def store_split(acc, c_desc, c_buf, row, col, ROWS: tl.constexpr, BN: tl.constexpr, EPI_SPLIT: tl.constexpr):
    """acc (ROWS x BN) stored as EPI_SPLIT column chunks of BN / EPI_SPLIT through one staging buffer
    that size: the C staging shrinks EPI_SPLIT-fold, which leaves shared memory for another ring stage."""
    if EPI_SPLIT == 1:
        store_chunk(acc, c_desc, c_buf, row, col)
    else:
        lo, hi = column_halves(acc, ROWS, BN)
        if EPI_SPLIT == 2:
            store_chunk(lo, c_desc, c_buf, row, col)
            store_chunk(hi, c_desc, c_buf, row, col + BN // 2)
        else:
            tl.static_assert(EPI_SPLIT == 4, "EPI_SPLIT must be 1, 2 or 4")
            Q: tl.constexpr = BN // 4
            q0, q1 = column_halves(lo, ROWS, BN // 2)
            q2, q3 = column_halves(hi, ROWS, BN // 2)
            store_chunk(q0, c_desc, c_buf, row, col)
            store_chunk(q1, c_desc, c_buf, row, col + Q)
            store_chunk(q2, c_desc, c_buf, row, col + 2 * Q)
            store_chunk(q3, c_desc, c_buf, row, col + 3 * Q)


@tlx.jit
def store_tile(acc, c_desc, c_bufs, bias_ptr, off_m, off_n, N, cid, HALF: tl.constexpr, BN: tl.constexpr,
               HAS_BIAS: tl.constexpr, ACTIVATION: tl.constexpr, EPI_SPLIT: tl.constexpr):
    """Consumer `cid`'s half of a finished tile: epilogue, then TMA stores through its staging buffer
    (the last left running: the next tile's main loop overlaps it)."""
    acc = epilogue(acc, bias_ptr, off_n, N, HAS_BIAS, ACTIVATION, BN)
    store_split(acc, c_desc, c_bufs[cid], off_m + cid * HALF, off_n, HALF, BN, EPI_SPLIT)


@tlx.jit
def stream_k_range(SK_TILES, k_tiles, NUM_SMS: tl.constexpr):
    """Stream-K: this program's K steps [u0, u1) of the last SK_TILES tiles laid end to end (tile-major),
    an equal share each, and how many tiles (segments) the share touches. With SK_TILES >= NUM_SMS a
    share spans at least a tile, so a tile has at most two owners: the program whose share ends inside
    it (its first K steps) and the next one."""
    units = SK_TILES * k_tiles
    pid = tl.program_id(0)
    u0 = pid * units // NUM_SMS
    u1 = (pid + 1) * units // NUM_SMS
    return u0, u1, (u1 - 1) // k_tiles - u0 // k_tiles + 1


@tlx.jit
def stream_k_segment(i, u0, u1, k_tiles):
    """Segment i of the share [u0, u1), its last tile first: (the tile's index among the stream-K tiles,
    its K steps [kb, ke) in this share)."""
    t = (u1 - 1) // k_tiles - i
    return t, tl.maximum(u0 - t * k_tiles, 0), tl.minimum(u1 - t * k_tiles, k_tiles)


@tlx.jit
def partial_offsets(acc, slot, HALF: tl.constexpr, BN: tl.constexpr):
    """Element offsets of workspace slot `slot` in the accumulator's own (wgmma) layout. Adding the
    accumulator's bits AND 0 gives the index tensor that layout (LLVM folds the AND away); an index
    tensor without one would be given the coalesced store layout, and the 64 KB accumulator would
    be converted to it through shared memory, which the ring leaves no room for. Only the same
    threads read the workspace back, in the same layout."""
    rows = tl.arange(0, HALF)
    cols = tl.arange(0, BN)
    return slot * (HALF * BN) + rows[:, None] * BN + cols[None, :] + (acc.to(tl.int32, bitcast=True) & 0)


@tlx.jit
def share_partial(acc, ws_ptr, flags_ptr, slot, cid, HALF: tl.constexpr, BN: tl.constexpr):
    """Stream-K: the first K steps of a tile that the next program finishes: the partial sums to the
    workspace slot, then its flag, released once every thread of the warp group has stored."""
    tl.store(ws_ptr + partial_offsets(acc, slot, HALF, BN), acc)
    tlx.named_barrier_wait(10 + cid, 128)
    tl.atomic_xchg(flags_ptr + slot, 1, sem="release", scope="gpu")


@tlx.jit
def take_partial(acc, ws_ptr, flags_ptr, slot, taken, HALF: tl.constexpr, BN: tl.constexpr):
    """Stream-K, before a tile's K steps: when `taken` (the previous program began the tile), its partial
    sums become the accumulator (loaded in its place: adding them after the steps would hold two
    64 x BN tiles in registers); else zeros, which the segment's first wgmma ignores. That program
    computed the partial first in its share, so the wait is short and never circular. The flag is
    cleared for the next launch. Straight-line code (masked, not branched): a branch that defined the
    accumulator on one path made ptxas serialize every wgmma (C7515)."""
    while (tl.atomic_add(flags_ptr + slot, 0, sem="acquire", scope="gpu") == 0) & taken:
        pass
    acc = tl.load(ws_ptr + partial_offsets(acc, slot, HALF, BN), mask=taken, other=0.0, cache_modifier=".cg")
    tl.atomic_xchg(flags_ptr + slot, 0, mask=taken, sem="relaxed", scope="gpu")
    return acc


TRACE_SLOTS = 16   # stamps per consumer: start, data-parallel end, 3 per stream-K segment (4 at most), end


@tlx.jit
def stamp(trace_ptr, cid, slot, TRACE: tl.constexpr):
    """TRACE: the global nanosecond timer into trace[program, consumer, slot] (bench/gemm_trace.py reads
    it); slots past the end are dropped."""
    if TRACE:
        tl.store(trace_ptr + (tl.program_id(0) * 2 + cid) * TRACE_SLOTS + slot, tlx.globaltimer(),
                 mask=slot < TRACE_SLOTS)


@tlx.jit
def cluster_tile(unit, rank, M, N, BM: tl.constexpr, BN: tl.constexpr, GROUP_M: tl.constexpr, CLUSTER: tl.constexpr):
    """The tile of work unit `unit` for CTA `rank` of its cluster: units are CLUSTER x 1 blocks of tiles in
    grouped order, so a cluster's CTAs share off_n (and B) and take consecutive row blocks."""
    off_m, off_n = grouped_tile(unit, M, N, BM * CLUSTER, BN, GROUP_M)
    return off_m + rank * BM, off_n


@tlx.jit
def matmul_persistent_kernel(a_desc, b_desc, c_desc, bias_ptr, ws_ptr, flags_ptr, trace_ptr, M, N, K, SK_TILES,
                             BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, STAGES: tl.constexpr,
                             GROUP_M: tl.constexpr, NUM_SMS: tl.constexpr, A_T: tl.constexpr, B_T: tl.constexpr,
                             HAS_BIAS: tl.constexpr, ACTIVATION: tl.constexpr, NO_ZERO_FILL: tl.constexpr,
                             STREAM_K: tl.constexpr, TRACE: tl.constexpr, LEAN_SYNC: tl.constexpr,
                             EPI_SPLIT: tl.constexpr = 1, CLUSTER: tl.constexpr = 1):
    """Persistent cooperative warp-specialized GEMM: one TMA producer task walks every tile of this
    program and fills a STAGES-deep ring; two consumer warp groups split each BM tile in halves.
    A consumer's TMA store of tile t overlaps the producer's loads (and its own wgmma) of tile t+1.
    A_T / B_T: the operand is stored transposed (column-major), read through a transposed view.
    NO_ZERO_FILL: the first wgmma of a tile does not accumulate (use_acc false at k = 0), so the
    accumulator is zeroed once per program instead of once per tile (ptxas zeroed it twice per tile, on
    two paths: 128 CS2R per thread). Right for K > 0 only (a tile without wgmmas would store the
    previous one), which the TMA descriptors already require.
    STREAM_K: the last SK_TILES tiles (the partial last wave plus one full wave, host-chosen) are not
    dealt whole: their K steps are split evenly over all programs (stream_k_range), so every SM
    finishes at nearly the same time. A tile split between programs p and p+1 is finished by p+1 with
    p's partial sums from an fp32 workspace (share_partial / take_partial). Each program walks its
    share from its last tile down, so p writes its partial before anything else and p+1 reads it
    last: a program waits only on the one before it, which is resident (one program per SM) or
    already done (the CPU simulator runs programs in order).
    TRACE: each consumer stamps the global timer into trace_ptr (stamp): its start, the end of its
    data-parallel tiles, each stream-K segment's start, partial taken and K steps done, its end.
    CLUSTER=2 (launched in two-CTA clusters; checked on the simulator and on an H100;
    docs/cluster_feasibility.md):
    the two CTAs of a cluster walk the same units of two row-adjacent tiles (cluster_tile), each loads
    its own A and half of the shared B tile, multicast into both CTAs (load_b_half), and the consumers
    release every B stage in both CTAs. Cluster barriers opening and closing every task (cluster_sync)
    keep each CTA's shared memory valid while the other reaches into it."""
    c_dtype = tlx.dtype_of(c_desc)
    dtype = tlx.dtype_of(a_desc)
    HALF: tl.constexpr = BM // 2
    if A_T:
        a_bufs = tlx.local_alloc((BK, HALF), dtype, 2 * STAGES)
    else:
        a_bufs = tlx.local_alloc((HALF, BK), dtype, 2 * STAGES)
    if B_T:
        b_bufs = tlx.local_alloc((BN, BK), dtype, STAGES)
    else:
        b_bufs = tlx.local_alloc((BK, BN), dtype, STAGES)
    c_bufs = tlx.local_alloc((HALF, BN // EPI_SPLIT), c_dtype, 2)
    full_a = tlx.alloc_barriers(2 * STAGES)
    full_b = tlx.alloc_barriers(STAGES)
    empty_a = tlx.alloc_barriers(2 * STAGES)
    empty_b = tlx.alloc_barriers(STAGES, arrive_count=2 * CLUSTER)     # every consumer of the cluster reads B
    num_tiles = tl.cdiv(M, BM * CLUSTER) * tl.cdiv(N, BN)              # work units (a tile per CTA)
    dp_tiles = num_tiles - SK_TILES if STREAM_K else num_tiles
    k_tiles = tl.cdiv(K, BK)
    first = tl.program_id(0) // CLUSTER
    rank = cluster_rank(CLUSTER)
    with tlx.async_tasks():
        with tlx.async_task("default"):                                  # producer
            cluster_sync(CLUSTER)
            cnt = 0
            for tile in range(first, dp_tiles, NUM_SMS // CLUSTER):
                off_m, off_n = cluster_tile(tile, rank, M, N, BM, BN, GROUP_M, CLUSTER)
                cnt = load_k_steps(a_desc, b_desc, a_bufs, b_bufs, full_a, full_b, empty_a, empty_b, off_m, off_n,
                                   0, k_tiles, cnt, HALF, BK, BN, STAGES, A_T, B_T, rank, CLUSTER)
            if STREAM_K:
                u0, u1, segments = stream_k_range(SK_TILES, k_tiles, NUM_SMS)
                for i in range(segments):
                    t, kb, ke = stream_k_segment(i, u0, u1, k_tiles)
                    off_m, off_n = grouped_tile(dp_tiles + t, M, N, BM, BN, GROUP_M)
                    cnt = load_k_steps(a_desc, b_desc, a_bufs, b_bufs, full_a, full_b, empty_a, empty_b, off_m,
                                       off_n, kb, ke, cnt, HALF, BK, BN, STAGES, A_T, B_T)
            cluster_sync(CLUSTER)
        with tlx.async_task(num_warps=4, registers=232, replicate=2):    # consumers
            cluster_sync(CLUSTER)
            cid = tlx.async_task_replica_id()
            stamp(trace_ptr, cid, 0, TRACE)
            cnt = 0
            if NO_ZERO_FILL:                     # zeroed once: each tile's first wgmma ignores it
                acc = tl.zeros((HALF, BN), dtype=tl.float32)
            for tile in range(first, dp_tiles, NUM_SMS // CLUSTER):
                off_m, off_n = cluster_tile(tile, rank, M, N, BM, BN, GROUP_M, CLUSTER)
                if not NO_ZERO_FILL:
                    acc = tl.zeros((HALF, BN), dtype=tl.float32)
                acc, cnt = mma_k_steps(a_bufs, b_bufs, full_a, full_b, empty_a, empty_b, acc, 0, k_tiles, 0, cnt,
                                       cid, STAGES, A_T, B_T, NO_ZERO_FILL, LEAN_SYNC, rank, CLUSTER)
                store_tile(acc, c_desc, c_bufs, bias_ptr, off_m, off_n, N, cid, HALF, BN, HAS_BIAS, ACTIVATION,
                           EPI_SPLIT)
            stamp(trace_ptr, cid, 1, TRACE)
            if STREAM_K:
                u0, u1, segments = stream_k_range(SK_TILES, k_tiles, NUM_SMS)
                for i in range(segments):
                    t, kb, ke = stream_k_segment(i, u0, u1, k_tiles)
                    off_m, off_n = grouped_tile(dp_tiles + t, M, N, BM, BN, GROUP_M)
                    stamp(trace_ptr, cid, 2 + 3 * i, TRACE)
                    acc = take_partial(acc, ws_ptr, flags_ptr, 2 * t + cid, kb > 0, HALF, BN)
                    stamp(trace_ptr, cid, 3 + 3 * i, TRACE)
                    acc, cnt = mma_k_steps(a_bufs, b_bufs, full_a, full_b, empty_a, empty_b, acc, kb, ke,
                                           -1 if kb > 0 else kb, cnt, cid, STAGES, A_T, B_T, NO_ZERO_FILL, LEAN_SYNC)
                    stamp(trace_ptr, cid, 4 + 3 * i, TRACE)
                    if ke < k_tiles:                                     # the next program finishes it
                        share_partial(acc, ws_ptr, flags_ptr, 2 * t + cid, cid, HALF, BN)
                    else:
                        store_tile(acc, c_desc, c_bufs, bias_ptr, off_m, off_n, N, cid, HALF, BN, HAS_BIAS,
                                   ACTIVATION, EPI_SPLIT)
            tlx.async_descriptor_store_wait(0)
            stamp(trace_ptr, cid, TRACE_SLOTS - 1, TRACE)
            cluster_sync(CLUSTER)


@tlx.jit
def matmul_pingpong_kernel(a_desc, b_desc, c_desc, bias_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr,
                           BK: tl.constexpr, STAGES: tl.constexpr, GROUP_M: tl.constexpr,
                           NUM_SMS: tl.constexpr, A_T: tl.constexpr, B_T: tl.constexpr,
                           HAS_BIAS: tl.constexpr, ACTIVATION: tl.constexpr, PIN_PROLOGUE: tl.constexpr,
                           NO_ZERO_FILL: tl.constexpr, LEAN_SYNC: tl.constexpr):
    """Persistent ping-pong GEMM: each consumer warp group owns whole BMxBN tiles, alternately (local
    tile i goes to consumer i % 2): one runs its main loop while the other runs its epilogue (bias,
    activation, TMA store). Wins over the cooperative kernel when K is short.
    The main loops are ordered by named barriers 8/9: a consumer starts waiting on the ring only after
    the other has waited on its last stage, so no wait targets a phase more than one ahead (an mbarrier
    wait sees parity only: waiting early would pass on the other consumer's older phase).
    PIN_PROLOGUE: nothing in the tile prologue (grouped_tile's integer divisions, the accumulator
    zeroing) depends on the turn wait, and ptxas 12.8 sank it below the wait, between getting the turn
    and the first wgmma; storing the tile offsets (to `pins`, never read) before the wait keeps the
    divisions above it. NO_ZERO_FILL (as the cooperative kernel's) removes the zeroing."""
    dtype = tlx.dtype_of(a_desc)
    c_dtype = tlx.dtype_of(c_desc)
    if A_T:
        a_bufs = tlx.local_alloc((BK, BM), dtype, STAGES)
    else:
        a_bufs = tlx.local_alloc((BM, BK), dtype, STAGES)
    if B_T:
        b_bufs = tlx.local_alloc((BN, BK), dtype, STAGES)
    else:
        b_bufs = tlx.local_alloc((BK, BN), dtype, STAGES)
    c_bufs = tlx.local_alloc((BM, BN), c_dtype, 2)
    if PIN_PROLOGUE:
        pins = tlx.local_alloc((2,), tl.int32, 2)                    # written, never read (see below)
    full = tlx.alloc_barriers(STAGES)
    empty = tlx.alloc_barriers(STAGES)
    num_tiles = tl.cdiv(M, BM) * tl.cdiv(N, BN)
    k_tiles = tl.cdiv(K, BK)
    first = tl.program_id(0)
    n_local = tl.cdiv(num_tiles - first, NUM_SMS)
    NBYTES: tl.constexpr = (BM * BK + BK * BN) * tlx.size_of(dtype)
    with tlx.async_tasks():
        with tlx.async_task("default"):                                  # producer
            cnt = 0
            for i in range(n_local):
                off_m, off_n = grouped_tile(first + i * NUM_SMS, M, N, BM, BN, GROUP_M)
                for k in range(k_tiles):
                    s, p = tlx.warp_spec.get_bufidx_phase(cnt, STAGES)
                    tlx.barrier_wait(empty[s], p ^ 1)
                    tlx.barrier_expect_bytes(full[s], NBYTES)
                    load_tile(a_desc, a_bufs[s], off_m, k * BK, full[s], A_T)
                    load_tile(b_desc, b_bufs[s], k * BK, off_n, full[s], B_T)
                    cnt += 1
        with tlx.async_task(num_warps=4, registers=232, replicate=2):    # consumers, alternate tiles
            cid = tlx.async_task_replica_id()
            if cid == 1:
                tlx.named_barrier_arrive(8, 256)                         # consumer 0 goes first
            if NO_ZERO_FILL:                     # zeroed once: each tile's first wgmma ignores it
                acc = tl.zeros((BM, BN), dtype=tl.float32)
            for i in range(cid, n_local, 2):
                off_m, off_n = grouped_tile(first + i * NUM_SMS, M, N, BM, BN, GROUP_M)
                cnt = i * k_tiles
                if not NO_ZERO_FILL:
                    acc = tl.zeros((BM, BN), dtype=tl.float32)
                if PIN_PROLOGUE:                 # the offsets to shared memory: their divisions stay above
                    tlx.local_store(pins[cid], tl.where(tl.arange(0, 2) == 0, off_m, off_n))   # the wait
                tlx.named_barrier_wait(8 + cid, 256)                     # my turn on the ring
                for k in range(k_tiles):
                    s, p = tlx.warp_spec.get_bufidx_phase(cnt, STAGES)
                    tlx.barrier_wait(full[s], p, warpgroup_sync=not LEAN_SYNC)
                    a_op = tlx.local_trans(a_bufs[s]) if A_T else a_bufs[s]
                    b_op = tlx.local_trans(b_bufs[s]) if B_T else b_bufs[s]
                    acc = tlx.async_dot(a_op, b_op, acc, use_acc=k > 0 if NO_ZERO_FILL else None)
                    acc = tlx.async_dot_wait(1, acc)
                    if k > 0:
                        tlx.barrier_arrive(empty[(cnt - 1) % STAGES], warpgroup_sync=not LEAN_SYNC)
                    cnt += 1
                tlx.named_barrier_arrive(9 - cid, 256)                   # the other's turn
                acc = tlx.async_dot_wait(0, acc)
                tlx.barrier_arrive(empty[(cnt - 1) % STAGES], warpgroup_sync=not LEAN_SYNC)
                acc = epilogue(acc, bias_ptr, off_n, N, HAS_BIAS, ACTIVATION, BN)
                tlx.async_descriptor_store_wait(0)
                tlx.local_store(c_bufs[cid], acc.to(c_dtype))
                tlx.fence_async_shared()
                tlx.async_descriptor_store(c_desc, c_bufs[cid], [off_m, off_n])
            tlx.async_descriptor_store_wait(0)


@dataclass(frozen=True)
class Config:
    """One GEMM configuration. `kernel`: "persistent" (warp-specialized, persistent), "ws"
    (warp-specialized, one tile per program) or "pipelined" (no warp specialization)."""
    kernel: str = "persistent"
    BM: int = 128
    BN: int = 256
    BK: int = 64
    STAGES: int = 3
    GROUP_M: int = 8
    num_warps: int = 4
    SPLIT_K: int = 1      # "pipelined" only: != 1 runs split-K (fp32 partials, then a reduce with the epilogue);
    #                       K split over SPLIT_K programs per tile, 0 = as many as fill the GPU
    PIN_PROLOGUE: bool = False   # "pingpong": tile prologue above the turn wait (gemm-run6: no change alone)
    NO_ZERO_FILL: bool = False   # persistent kernels: no per-tile accumulator zeroing (gemm-run6: 0-3%)
    STREAM_K: bool = False       # "persistent": the last wave's K steps spread over every SM (stream_k_tiles;
    #                              gemm-run8: 2-27% slower than without, so no default uses it)
    LEAN_SYNC: bool = False      # persistent kernels: no warp-group bar.sync around the consumers' ring waits
    #                              and releases (barrier_arrive's warpgroup_sync=False; only wgmmas read the ring);
    #                              pipelined: one CTA barrier per K step instead of four
    EPI_SPLIT: int = 1           # persistent and pipelined: C stored in EPI_SPLIT column chunks through one staging
    #                              buffer that size (store_split), so 128x256 tiles fit a fourth ring stage
    CLUSTER: int = 1             # "persistent": 2 runs two-CTA clusters sharing B by multicast (at parity with
    #                              CLUSTER=1 on an H100, not in the default table: docs/cluster_feasibility.md)

    def __post_init__(self):
        if self.kernel not in KERNELS:
            raise ConfigRejected(f"gemm.Config: 'kernel' must be one of {sorted(KERNELS)}, got {self.kernel!r}")
        for name, least in (("BM", 64), ("BN", 16), ("BK", 16)):   # tiles are powers of two; a warp group's
            size = getattr(self, name)                                # wgmma computes 64 rows
            if not isinstance(size, int) or size < least or size & (size - 1):
                raise ConfigRejected(f"gemm.Config: '{name}' must be a power of two >= {least}, got {size!r}")
        if self.STAGES < 2:
            raise ConfigRejected(f"gemm.Config: 'STAGES' must be >= 2 (a consumer frees a stage only after issuing "
                                 f"the next K step's wgmma, so one stage deadlocks), got {self.STAGES}")
        if self.GROUP_M < 1:
            raise ConfigRejected(f"gemm.Config: 'GROUP_M' must be >= 1 (row tiles per L2 group), got {self.GROUP_M}")
        warps = (4, 8) if self.kernel == "pipelined" else (4,)   # warp-specialized: the producer task's 4 warps
        if self.num_warps not in warps:
            raise ConfigRejected(f"gemm.Config: 'num_warps' must be one of {warps} for {self.kernel!r}, got "
                                 f"{self.num_warps}")
        if self.kernel in ("persistent", "ws") and self.BM != 128:
            raise ConfigRejected(f"gemm.Config: 'BM' must be 128 for {self.kernel!r} (two 64-row consumer groups), "
                                 f"got {self.BM}")
        if self.SPLIT_K != 1 and (self.kernel != "pipelined" or self.SPLIT_K < 0):
            raise ConfigRejected(f"gemm.Config: 'SPLIT_K' must be 1 for {self.kernel!r} (split-K is the pipelined "
                                 f"kernel's) and >= 0, got {self.SPLIT_K}")
        if self.PIN_PROLOGUE and self.kernel != "pingpong":
            raise ConfigRejected(f"gemm.Config: 'PIN_PROLOGUE' is the pingpong kernel's, got {self.kernel!r}")
        if self.NO_ZERO_FILL and self.kernel not in PERSISTENT:
            raise ConfigRejected(f"gemm.Config: 'NO_ZERO_FILL' needs a persistent kernel, got {self.kernel!r}")
        if self.LEAN_SYNC and self.kernel not in (*PERSISTENT, "pipelined"):
            raise ConfigRejected(f"gemm.Config: 'LEAN_SYNC' is the persistent and pipelined kernels', got "
                                 f"{self.kernel!r}")
        if self.EPI_SPLIT not in (1, 2, 4) or (self.EPI_SPLIT != 1 and self.kernel not in ("persistent", "pipelined")):
            raise ConfigRejected(f"gemm.Config: 'EPI_SPLIT' must be 1, 2 or 4, and above 1 only for the persistent and "
                                 f"pipelined kernels, got {self.EPI_SPLIT} for {self.kernel!r}")
        if self.EPI_SPLIT != 1 and (self.SPLIT_K != 1 or self.STREAM_K):
            raise ConfigRejected("gemm.Config: 'EPI_SPLIT' does not combine with SPLIT_K or STREAM_K (their fp32 "
                                 "partials keep whole tiles)")
        if self.CLUSTER not in (1, 2) or (self.CLUSTER == 2 and (self.kernel != "persistent" or self.STREAM_K)):
            raise ConfigRejected(f"gemm.Config: 'CLUSTER' must be 1 or 2, and 2 only for the persistent kernel "
                                 f"without STREAM_K, got {self.CLUSTER} for {self.kernel!r}")
        if self.STREAM_K and (self.kernel != "persistent" or not self.NO_ZERO_FILL):
            raise ConfigRejected(f"gemm.Config: 'STREAM_K' needs the persistent kernel with NO_ZERO_FILL (the "
                                 f"accumulator carried from tile to tile), got {self.kernel!r}, "
                                 f"NO_ZERO_FILL={self.NO_ZERO_FILL}")

    def name(self) -> str:
        split = "" if self.SPLIT_K == 1 else f"-splitk{self.SPLIT_K or 'auto'}"
        group = "" if self.GROUP_M == 8 else f"-g{self.GROUP_M}"
        flags = ("-pin" if self.PIN_PROLOGUE else "") + ("-noacc0" if self.NO_ZERO_FILL else "") + \
            ("-streamk" if self.STREAM_K else "") + ("-lean" if self.LEAN_SYNC else "") + \
            (f"-epi{self.EPI_SPLIT}" if self.EPI_SPLIT != 1 else "") + (f"-c{self.CLUSTER}" if self.CLUSTER != 1 else "")
        return f"{self.kernel}-{self.BM}x{self.BN}x{self.BK}s{self.STAGES}w{self.num_warps}{group}{split}{flags}"

    def shared_bytes(self, in_bytes: int, out_bytes: int) -> int:
        """The kernel's shared memory: the A/B ring plus the C staging tiles (two for ping-pong; fp32
        partials under split-K)."""
        ring = self.STAGES * (self.BM * self.BK + self.BK * self.BN) * in_bytes
        c_tiles = 2 if self.kernel == "pingpong" else 1
        c_bytes = 4 if self.SPLIT_K != 1 else out_bytes
        return ring + c_tiles * self.BM * self.BN // self.EPI_SPLIT * c_bytes

    def splits(self, M: int, N: int, K: int, sms: int) -> int:
        """The K split of a problem: SPLIT_K, or (0) as many as fill `sms` programs while every split
        keeps at least 4 K tiles, at most 8."""
        if self.SPLIT_K:
            return self.SPLIT_K
        tiles = triton.cdiv(M, self.BM) * triton.cdiv(N, self.BN)
        return max(1, min(sms // tiles, triton.cdiv(K, self.BK) // 4, 8))


KERNELS = {"persistent": matmul_persistent_kernel, "pingpong": matmul_pingpong_kernel, "ws": matmul_ws_kernel,
           "pipelined": matmul_pipelined_kernel}
PERSISTENT = ("persistent", "pingpong")
SUPPORTED = ("float16", "bfloat16")
ACTIVATIONS = (None, "relu", "gelu", "silu")


def configs() -> list[Config]:
    """Candidate configurations for the tuner and the benchmark."""
    return [Config("persistent", 128, 256, 64, 3), Config("persistent", 128, 128, 64, 4),
            Config("persistent", 128, 256, 64, 3, 16),           # wider L2 groups: short K (gemm-run3)
            Config("pingpong", 128, 128, 64, 4), Config("pingpong", 128, 128, 64, 5), Config("pingpong", 128, 64, 64, 6),
            Config("pipelined", 128, 256, 64, 3, 8, 8),
            # skinny problems: more, smaller tiles so every SM streams its share of the big operand ...
            Config("pipelined", 128, 64, 64, 6, 8, 4), Config("pipelined", 64, 128, 64, 6, 8, 4),
            Config("pipelined", 128, 64, 64, 8, 8, 4), Config("pipelined", 64, 128, 64, 8, 8, 4),   # more bytes in flight
            # ... or whole-M/N tiles with K split across programs, so each operand byte is read once
            Config("pipelined", 128, 128, 64, 4, 8, 4, SPLIT_K=0),
            # SASS-study fixes beside their plain configs above (docs/sass_studies.md, GEMM; gemm-run6)
            Config("pingpong", 128, 128, 64, 5, PIN_PROLOGUE=True),
            Config("pingpong", 128, 128, 64, 5, PIN_PROLOGUE=True, NO_ZERO_FILL=True),
            Config("persistent", 128, 256, 64, 3, 16, NO_ZERO_FILL=True),
            # no warp-group bar.sync around the consumers' ring waits and releases (barrier_elision)
            Config("pingpong", 128, 128, 64, 5, PIN_PROLOGUE=True, NO_ZERO_FILL=True, LEAN_SYNC=True),
            Config("persistent", 128, 256, 64, 3, 16, NO_ZERO_FILL=True, LEAN_SYNC=True),
            # one CTA barrier per K step instead of four (matmul_pipelined_kernel)
            Config("pipelined", 128, 256, 64, 3, 8, 8, LEAN_SYNC=True), Config("pipelined", 64, 128, 64, 8, 8, 4, LEAN_SYNC=True),
            # C stored in column chunks: the staging it frees holds a fourth ring stage (cuBLAS: 4 stages, 208 KB);
            # without LEAN_SYNC or with quarter chunks they ran within a run's spread of these (gemm-run3, H100)
            Config("persistent", 128, 256, 64, 4, 16, NO_ZERO_FILL=True, LEAN_SYNC=True, EPI_SPLIT=2),
            Config("pipelined", 128, 256, 64, 4, 8, 8, LEAN_SYNC=True, EPI_SPLIT=2)]
# Not a candidate: STREAM_K on the g16 NO_ZERO_FILL config ran 2-7% below it where it applies (4096^3 -7%,
# 16384x2048x4096 -2%) and 27% below at 4096x4096x512 (gemm-run8); it stays an option.


def column_major(t) -> bool:
    """An operand stored transposed (unit stride down a column): read through a transposed shared-
    memory view by the persistent kernels; check_operands admits only this and row-major."""
    return t.stride(0) == 1 and t.stride(1) != 1


def _tma_ok(t) -> bool:
    """Row-major (or column-major) with 16-byte aligned base and pitch: what a TMA descriptor needs."""
    pitch = t.stride(0) if t.stride(1) == 1 else t.stride(1) if t.stride(0) == 1 else None
    aligned = hasattr(t, "fake_mode") or t.data_ptr() % 16 == 0   # fake tensors (torch.compile) have no data
    return pitch is not None and (pitch * t.element_size()) % 16 == 0 and aligned


def check_operands(a, b, bias=None, activation=None, out_dtype=None) -> None:
    if a.dim() != 2 or b.dim() != 2:
        raise ValueError(f"tlx.matmul: 'a' and 'b' must be 2-D, got shapes {tuple(a.shape)} and {tuple(b.shape)}")
    if a.shape[1] != b.shape[0]:
        raise ValueError(f"tlx.matmul: inner sizes must match, got a {tuple(a.shape)} and b {tuple(b.shape)}")
    if a.dtype != b.dtype or str(a.dtype).replace("torch.", "") not in SUPPORTED:
        raise ValueError(f"tlx.matmul: 'a' and 'b' must both be float16 or bfloat16, got {a.dtype} and {b.dtype}")
    if a.device != b.device:
        raise ValueError(f"tlx.matmul: 'a' and 'b' must be on one device, got {a.device} and {b.device}")
    for name, t in (("a", a), ("b", b)):
        if t.numel() and not _tma_ok(t):                 # an empty operand is never loaded (matmul)
            raise ValueError(f"tlx.matmul: '{name}' must be row- or column-major with a 16-byte aligned base and "
                             f"pitch (TMA), got strides {t.stride()} of {t.dtype}; pass a padded .contiguous() copy")
    if bias is not None and (bias.dim() != 1 or bias.shape[0] != b.shape[1] or bias.device != a.device):
        raise ValueError(f"tlx.matmul: 'bias' must be 1-D of size N={b.shape[1]} on {a.device}, got "
                         f"{tuple(bias.shape)} on {bias.device}")
    if bias is not None and bias.shape[0] > 1 and bias.stride(0) != 1:   # the epilogue reads it at unit stride
        raise ValueError(f"tlx.matmul: 'bias' must be contiguous, got stride {bias.stride(0)}; pass bias.contiguous()")
    if activation not in ACTIVATIONS:
        raise ValueError(f"tlx.matmul: 'activation' must be one of {ACTIVATIONS}, got {activation!r}")
    if out_dtype is not None and str(out_dtype).replace("torch.", "") not in (*SUPPORTED, "float32"):
        raise ValueError(f"tlx.matmul: 'out_dtype' must be float16, bfloat16 or float32, got {out_dtype}")
    if out_dtype is not None and str(out_dtype).replace("torch.", "") != "float32" and out_dtype != a.dtype:
        raise ValueError(f"tlx.matmul: 'out_dtype' must be the input dtype {a.dtype} or float32, got {out_dtype}")


def check_out(out, M: int, N: int, out_dtype, device) -> None:
    """`out` as the kernels store C through a TMA descriptor: [M, N] of the output dtype on the operands' device,
    rows contiguous, 16-byte aligned base and pitch (a view into a wider buffer is fine)."""
    if tuple(out.shape) != (M, N) or out.dtype != out_dtype or out.device != device:
        raise ValueError(f"tlx.matmul: 'out' must be a {out_dtype} tensor of shape ({M}, {N}) on {device}, got "
                         f"{out.dtype} {tuple(out.shape)} on {out.device}")
    if out.numel() and (out.stride(1) != 1 or not _tma_ok(out)):
        raise ValueError(f"tlx.matmul: 'out' must be row-major with a 16-byte aligned base and pitch (TMA), got "
                         f"strides {out.stride()} of {out.dtype}")


def empty_product(c, bias, activation):
    """C = act(bias) (0 without one) for K = 0, where A @ B is all zeros: torch.matmul's answer, computed on the
    host side since no tile has a K step to run."""
    import torch.nn.functional as F
    c.zero_()
    if bias is not None:
        c += bias.to(c.dtype)
    if activation is not None:
        c.copy_({"relu": F.relu, "gelu": F.gelu, "silu": F.silu}[activation](c.float()))
    return c


def launch_args(a, b, c, cfg: Config, bias=None, activation=None, programs: int | None = None, trace=None):
    """Descriptors, grid and constexprs of one launch (the simulator and the GPU share them).
    `programs`: persistent kernels' program count (default: one per SM); tests use few programs so
    that each walks several tiles. `trace`: an int64 tensor of programs x 2 x TRACE_SLOTS the
    persistent kernel stamps its phases into (`stamp`; bench/gemm_trace.py)."""
    if trace is not None and cfg.kernel != "persistent":
        raise ConfigRejected(f"gemm: 'trace' is the persistent kernel's, got {cfg.kernel!r}")
    M, K = a.shape
    N = b.shape[1]
    need = cfg.shared_bytes(a.element_size(), c.element_size())
    if need > SHARED_LIMIT:
        raise ConfigRejected(f"gemm: {cfg.name()} needs {need} bytes of shared memory with a {c.dtype} output, "
                             f"more than the {SHARED_LIMIT} a block may use (fewer STAGES, a smaller BN, or a 16-bit "
                             "output)")
    rows = cfg.BM // 2 if cfg.kernel in ("persistent", "ws") else cfg.BM
    a_t, b_t = column_major(a), column_major(b)
    if (a_t or b_t) and cfg.kernel not in PERSISTENT:
        raise ConfigRejected(f"gemm: transposed operands need a persistent kernel, got {cfg.kernel!r}")
    a_desc = tlx.TensorDescriptor.from_tensor(a.T, [cfg.BK, rows]) if a_t else \
        tlx.TensorDescriptor.from_tensor(a, [rows, cfg.BK])
    b_cols = cfg.BN // cfg.CLUSTER                     # a cluster's CTAs load B's tile in parts (load_b_half)
    b_desc = tlx.TensorDescriptor.from_tensor(b.T, [b_cols, cfg.BK]) if b_t else \
        tlx.TensorDescriptor.from_tensor(b, [cfg.BK, b_cols])
    c_desc = tlx.TensorDescriptor.from_tensor(c, [rows, cfg.BN // cfg.EPI_SPLIT])
    tiles = triton.cdiv(M, cfg.BM) * triton.cdiv(N, cfg.BN)
    meta = dict(BM=cfg.BM, BN=cfg.BN, BK=cfg.BK, STAGES=cfg.STAGES, GROUP_M=cfg.GROUP_M)
    if cfg.kernel in PERSISTENT:
        sms = programs or num_sms(a.device)
        meta.update(NUM_SMS=sms, A_T=a_t, B_T=b_t, HAS_BIAS=bias is not None, ACTIVATION=activation,
                    NO_ZERO_FILL=cfg.NO_ZERO_FILL, LEAN_SYNC=cfg.LEAN_SYNC)
        bias_arg = bias if bias is not None else c
        grid = (min(tiles, sms),)
        if cfg.kernel == "pingpong":
            meta.update(PIN_PROLOGUE=cfg.PIN_PROLOGUE)
            return (a_desc, b_desc, c_desc, bias_arg, M, N, K), grid, meta
        sk_tiles = stream_k_tiles(tiles, sms) if cfg.STREAM_K else 0
        if trace is not None and (str(trace.dtype) != "torch.int64" or trace.numel() < sms * 2 * TRACE_SLOTS):
            raise ValueError(f"gemm.launch_args: 'trace' must be int64 with {sms} x 2 x {TRACE_SLOTS} elements, got "
                             f"{trace.dtype} with {trace.numel()}")
        meta.update(STREAM_K=sk_tiles > 0, TRACE=trace is not None, EPI_SPLIT=cfg.EPI_SPLIT)
        if cfg.CLUSTER > 1:                            # whole clusters, each on one work unit per round
            units = triton.cdiv(M, cfg.BM * cfg.CLUSTER) * triton.cdiv(N, cfg.BN)
            clusters = max(1, min(units, sms // cfg.CLUSTER))
            meta.update(CLUSTER=cfg.CLUSTER, NUM_SMS=clusters * cfg.CLUSTER, ctas_per_cga=(cfg.CLUSTER, 1, 1))
            grid = (clusters * cfg.CLUSTER,)
        ws, flags = stream_k_workspace(sk_tiles, cfg, a.device) if sk_tiles else (c, c)
        return (a_desc, b_desc, c_desc, bias_arg, ws, flags, c if trace is None else trace, M, N, K, sk_tiles), \
            grid, meta
    if bias is not None or activation is not None:
        raise ConfigRejected(f"gemm: bias/activation epilogues need a persistent kernel, got {cfg.kernel!r}")
    if cfg.kernel == "pipelined":                      # one K split: all K tiles, straight into C
        meta.update(LEAN_SYNC=cfg.LEAN_SYNC, EPI_SPLIT=cfg.EPI_SPLIT)
        return (a_desc, b_desc, c_desc, M, N, K, triton.cdiv(K, cfg.BK), 0), (tiles, 1), meta
    return (a_desc, b_desc, c_desc, M, N, K), (tiles,), meta


def stream_k_tiles(tiles: int, programs: int) -> int:
    """How many of the last tiles stream-K spreads over the programs: the partial last wave plus one
    full wave (so each program's share spans at least a whole tile and a tile has at most two owners),
    or none when the tiles fill whole waves or fit in one."""
    tail = tiles % programs
    return tail + programs if tail and tiles > programs else 0


def stream_k_workspace(sk_tiles: int, cfg: Config, device):
    """An fp32 partial tile per stream-K tile (two halves, one per consumer; only split tiles write
    theirs) and a zeroed int32 flag per half. Indexed by tile, so the kernel computes a slot's
    addresses where it uses them (per-program slots were loop-invariant: LLVM hoisted 64 addresses per
    thread out of the loops and ptxas spilled them). The kernel leaves every flag zero again, so one
    workspace serves every launch of a prepared matmul (launches on one stream run one at a time)."""
    import torch
    ws = torch.empty(sk_tiles * cfg.BM * cfg.BN, dtype=torch.float32, device=device)
    return ws, torch.zeros(2 * sk_tiles, dtype=torch.int32, device=device)


def splitk_launches(a, b, c, cfg: Config, splits: int, bias=None, activation=None, backend=None):
    """The two launches of a split-K product: `splits` programs per tile write fp32 partials into a
    workspace [splits * M rounded up to BM, N], then splitk_reduce_kernel sums them (with bias and
    activation) into c. Returns a callable running both; it owns the workspace."""
    import torch
    M, K = a.shape
    N = b.shape[1]
    if column_major(a) or column_major(b):
        raise ConfigRejected("gemm: split-K takes row-major operands (the pipelined kernel's)")
    rows = triton.cdiv(M, cfg.BM) * cfg.BM
    per_split = triton.cdiv(triton.cdiv(K, cfg.BK), splits)
    splits = triton.cdiv(triton.cdiv(K, cfg.BK), per_split)          # no split left without K tiles
    work = torch.empty((splits * rows, N), dtype=torch.float32, device=a.device)
    a_desc = tlx.TensorDescriptor.from_tensor(a, [cfg.BM, cfg.BK])
    b_desc = tlx.TensorDescriptor.from_tensor(b, [cfg.BK, cfg.BN])
    w_desc = tlx.TensorDescriptor.from_tensor(work, [cfg.BM, cfg.BN])
    tiles = triton.cdiv(M, cfg.BM) * triton.cdiv(N, cfg.BN)
    main = matmul_pipelined_kernel.prepare(a_desc, b_desc, w_desc, M, N, K, per_split, rows, grid=(tiles, splits),
                                           num_warps=cfg.num_warps, backend=backend, BM=cfg.BM, BN=cfg.BN,
                                           BK=cfg.BK, STAGES=cfg.STAGES, GROUP_M=cfg.GROUP_M,
                                           LEAN_SYNC=cfg.LEAN_SYNC)
    block_m, block_n = 32, 128
    reduce = splitk_reduce_kernel.prepare(work, c, bias if bias is not None else c, M, N, splits, rows, c.stride(0),
                                          grid=(triton.cdiv(M, block_m), triton.cdiv(N, block_n)), num_warps=4,
                                          backend=backend, HAS_BIAS=bias is not None, ACTIVATION=activation,
                                          BLOCK_M=block_m, BLOCK_N=block_n)

    def run():
        main()
        reduce()
    return holding(run, work)     # the partials' memory lives as long as the prepared launches


def default_config(M: int, N: int, K: int, in_bytes: int, out_bytes: int, epilogue: bool = False,
                   transposed: bool = False) -> Config:
    """The configuration for a shape: the table below is what bench/gemm.py measured fastest on the
    H200 (bench/results/2026-12-03/gemm-run2..6.json, every candidate side by side). NO_ZERO_FILL
    (the first wgmma of a tile does not accumulate) ran 0-3% over the same persistent config in
    gemm-run6, and with PIN_PROLOGUE took the ping-pong kernel from 1.044/1.027 to 1.080/1.036 of
    cuBLAS on 4096x4096x512 (bf16/fp16). The pipelined 128x256 choice takes a fourth stage (EPI_SPLIT=2)
    and LEAN_SYNC: +1-5% over its three-stage build at 2048^3 and 4096^3, -0.5% to +2% at 16384x2048x4096, in
    two H100 runs (2026-12-06 gemm-run3/4; no H200 was lent). The same change to the persistent choice
    was +6-7% at K=512 but -0.7% to -4.5% at 8192^3 in both runs, so it stays an option.
    The pipelined kernel runs only single-wave problems (2048^3: 0.99 of cuBLAS against 0.95-0.96 for the
    persistent one in three H100 runs). From one wave up the persistent kernel was as fast or faster in
    those runs (4096^3 bf16: 0.98/0.97/0.98 against 0.98/0.97/0.94; 16384x2048x4096: 0.96-1.03 against
    0.96-0.97, 2026-12-06 gemm-run3..5), and in four earlier H200 runs at 4096^3 it beat the three-stage
    pipelined build in six of eight cells.
    The pipelined kernels handle neither transposed operands nor fused epilogues; a bias or activation
    on a 64x256 fp32 accumulator spills, so epilogues take 128x128 tiles. A choice whose shared memory
    (fp32 output doubles the C tile) does not fit first quarters its C chunks if it already splits them,
    else falls back to the persistent 128x128 kernel.
    Split-K (Config.SPLIT_K) lost on every listed shape (0.84-0.86 of cuBLAS on the skinny ones) and is
    only taken when asked for."""
    waves = triton.cdiv(M, 128) * triton.cdiv(N, 256) / 132
    if epilogue:
        cfg = Config("persistent", 128, 128, 64, 4)
    elif transposed:
        cfg = Config("persistent")
    elif min(M, N) <= 256:                    # skinny: many small tiles stream the big operand
        cfg = Config("pipelined", 64, 128, 64, 8, 8, 4)   # 8 stages: 0.98-1.00 of cuBLAS, 6 stages 0.93-0.96
    elif K <= 512:                            # short K: overlap one tile's epilogue with the next's loop
        cfg = Config("pingpong", 128, 128, 64, 5, PIN_PROLOGUE=True, NO_ZERO_FILL=True)
    elif waves <= 1 and K > 1024:             # one wave: the non-persistent kernel's simpler loop wins
        cfg = Config("pipelined", 128, 256, 64, 4, 8, 8, LEAN_SYNC=True, EPI_SPLIT=2)
    else:                                     # wider L2 groups (+2-4% over 8 at K <= 1024)
        cfg = Config("persistent", 128, 256, 64, 3, 16, NO_ZERO_FILL=True)
    if cfg.shared_bytes(in_bytes, out_bytes) > SHARED_LIMIT and cfg.EPI_SPLIT == 2:
        cfg = replace(cfg, EPI_SPLIT=4)       # an fp32 output: quarter-width C chunks keep the fourth stage
    if cfg.shared_bytes(in_bytes, out_bytes) > SHARED_LIMIT:
        cfg = Config("persistent", 128, 128, 64, 4)
    return cfg


def candidates(M: int, N: int, K: int, in_bytes: int, out_bytes: int, epilogue: bool, transposed: bool) -> list[Config]:
    """What the tuner times for a problem: the table's choice first, then every configuration of
    `configs()` that can run it (transposed operands: persistent kernels; epilogues: persistent or
    split-K) within shared memory."""
    first = default_config(M, N, K, in_bytes, out_bytes, epilogue, transposed)
    usable = [c for c in configs() if c != first and c.shared_bytes(in_bytes, out_bytes) <= SHARED_LIMIT
              and (not transposed or c.kernel in PERSISTENT)
              and (not epilogue or c.kernel in PERSISTENT or c.SPLIT_K != 1)]
    return [first, *usable]


def tuned_config(a, b, c, bias, activation, backend, programs) -> Config:
    """The remembered fastest configuration for this problem, measured now if it is new (tlx/kernels/tuning.py)."""
    from dataclasses import asdict

    from tlx.kernels import tuning
    M, K = a.shape
    N = b.shape[1]
    a_t, b_t = column_major(a), column_major(b)
    problem = (f"{M}x{N}x{K} {str(a.dtype)[6:]}->{str(c.dtype)[6:]} a{'T' if a_t else 'N'}b{'T' if b_t else 'N'} "
               f"bias={bias is not None} act={activation}")
    known = tuning.remembered("gemm", problem, a.device)
    if known is not None:
        return Config(**{k: v for k, v in known.items() if k in Config.__dataclass_fields__})
    cands = candidates(M, N, K, a.element_size(), c.element_size(), bias is not None or activation is not None,
                       a_t or b_t)
    return tuning.tune("gemm", problem, a.device, cands,
                       run=lambda cfg: matmul(a, b, cfg, out=c, bias=bias, activation=activation, backend=backend,
                                              programs=programs),
                       result=lambda: c, fields=lambda cfg: dict(asdict(cfg), name=cfg.name()))


_LAST_LAUNCH = LaunchCache()


def matmul(a, b, config: Config | str | None = None, out=None, bias=None, activation=None, out_dtype=None,
           backend: str | None = None, programs: int | None = None):
    """C = act(A @ B + bias) with a tlx kernel. `config`: a Config, None (the shape table; with
    TLX_TUNE=1 in the environment, "tune") or "tune" (the fastest configuration measured on this GPU
    for this exact problem, timed on first use and remembered on disk). `backend="sim"` runs it on
    the CPU simulator. `out`: C's tensor, [M, N] of `out_dtype` (None: out's own dtype, else the input
    dtype), sharing no memory with a, b or bias. Empty problems answer as torch.matmul does: M or N = 0
    an empty C, K = 0 act(bias) (zeros without one)."""
    import os

    import torch
    if out is not None and out_dtype is None and str(out.dtype) not in (str(a.dtype), "torch.float32"):
        raise ValueError(f"tlx.matmul: 'out' must be of the input dtype {a.dtype} or float32, got {out.dtype}")
    out_dtype = out_dtype or (out.dtype if out is not None else a.dtype)
    check_operands(a, b, bias, activation, out_dtype)
    if not (config is None or config == "tune" or isinstance(config, Config)):
        raise ValueError(f"tlx.matmul: 'config' must be a gemm.Config, None or \"tune\", got {config!r}")
    if programs is not None and (not isinstance(programs, int) or isinstance(programs, bool) or programs < 1):
        raise ValueError(f"tlx.matmul: 'programs' must be None or an int >= 1, got {programs!r}")
    M, N, K = a.shape[0], b.shape[1], a.shape[1]
    if out is not None:
        check_out(out, M, N, out_dtype, a.device)
        name = overlapping_input(out, {"a": a, "b": b, "bias": bias})
        if name:
            raise ValueError(f"tlx.matmul: 'out' must not share memory with '{name}' (tiles still reading it "
                             "would see results already stored); pass a separate output")
    c = out if out is not None else torch.empty((M, N), dtype=out_dtype, device=a.device)
    if M == 0 or N == 0 or K == 0:                       # no tile, or no K step: nothing for a kernel to do
        return empty_product(c, bias, activation)
    if config == "tune" or (config is None and os.environ.get("TLX_TUNE") == "1"):
        config = tuned_config(a, b, c, bias, activation, backend, programs)   # measured once, then remembered
    transposed = column_major(a) or column_major(b)
    cfg = config or default_config(M, N, K, a.element_size(), c.element_size(),
                                   bias is not None or activation is not None, transposed)
    def prepare():
        if cfg.SPLIT_K != 1:
            return splitk_launches(a, b, c, cfg, cfg.splits(M, N, K, programs or num_sms(a.device)), bias,
                                   activation, backend)
        args, grid, meta = launch_args(a, b, c, cfg, bias, activation, programs)
        launch = KERNELS[cfg.kernel].prepare(*args, grid=grid, num_warps=cfg.num_warps, backend=backend, **meta)
        fit = getattr(launch, "max_active_clusters", None)
        if programs is None and fit and fit * cfg.CLUSTER < grid[0]:     # persistent: only co-resident clusters
            args, grid, meta = launch_args(a, b, c, cfg, bias, activation, fit * cfg.CLUSTER)
            launch = KERNELS[cfg.kernel].prepare(*args, grid=grid, num_warps=cfg.num_warps, backend=backend, **meta)
        return holding(launch, *args[4:6]) if meta.get("STREAM_K") else launch     # the workspace and flags

    key = (cfg, activation, backend, programs, *map(tensor_key, (a, b, c, bias)))
    _LAST_LAUNCH.get(key, prepare)()
    return c
