"""Correct TLX kernels used by the simulator tests (and their bug twins in test_protocol_bugs.py)."""
import triton.language as tl

import tlx


@tlx.jit
def two_task_add(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    """Task 0 stages x in shared memory and signals; task 1 adds y and stores."""
    pid = tl.program_id(0)
    staged = tlx.local_alloc((BLOCK,), tl.float32, 1)
    ready = tlx.alloc_barriers(1)
    with tlx.async_tasks():
        with tlx.async_task("default"):
            offs = pid * BLOCK + tl.arange(0, BLOCK)
            x = tl.load(x_ptr + offs, mask=offs < n, other=0.0)
            tlx.local_store(staged[0], x)
            tlx.barrier_arrive(ready[0])
        with tlx.async_task(num_warps=4):
            offs = pid * BLOCK + tl.arange(0, BLOCK)
            tlx.barrier_wait(ready[0], 0)
            x = tlx.local_load(staged[0])
            y = tl.load(y_ptr + offs, mask=offs < n, other=0.0)
            tl.store(out_ptr + offs, x + y, mask=offs < n)


@tlx.jit
def pipelined_gemm(a_desc, b_desc, c_desc, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
                   S: tl.constexpr):
    """One task: TMA loads run S-1 tiles ahead of the wgmma, one async_dot kept in flight."""
    m0 = tl.program_id(0) * BM
    n0 = tl.program_id(1) * BN
    A = tlx.local_alloc((BM, BK), tl.float16, S)
    B = tlx.local_alloc((BK, BN), tl.float16, S)
    C = tlx.local_alloc((BM, BN), tl.float16, 1)
    full = tlx.alloc_barriers(S)
    k_tiles = tl.cdiv(K, BK)
    for i in range(S - 1):
        if i < k_tiles:
            tlx.barrier_expect_bytes(full[i], (BM * BK + BK * BN) * 2)
            tlx.async_descriptor_load(a_desc, A[i], [m0, i * BK], full[i])
            tlx.async_descriptor_load(b_desc, B[i], [i * BK, n0], full[i])
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(k_tiles):
        s, p = tlx.warp_spec.get_bufidx_phase(k, S)
        tlx.barrier_wait(full[s], p)
        acc = tlx.async_dot(A[s], B[s], acc)
        acc = tlx.async_dot_wait(1, acc)          # dot k-1 is done: its slot may be refilled
        nk = k + S - 1
        if nk < k_tiles:
            ns = nk % S
            tlx.barrier_expect_bytes(full[ns], (BM * BK + BK * BN) * 2)
            tlx.async_descriptor_load(a_desc, A[ns], [m0, nk * BK], full[ns])
            tlx.async_descriptor_load(b_desc, B[ns], [nk * BK, n0], full[ns])
    acc = tlx.async_dot_wait(0, acc)
    tlx.local_store(C[0], acc.to(tl.float16))
    tlx.fence_async_shared()
    tlx.async_descriptor_store(c_desc, C[0], [m0, n0])
    tlx.async_descriptor_store_wait(0)


@tlx.jit
def ws_gemm(a_desc, b_desc, c_desc, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, S: tl.constexpr):
    """The warp-specialized GEMM of TLX_API.md: a TMA producer and two consumer warp groups."""
    m0 = tl.program_id(0) * BM
    n0 = tl.program_id(1) * BN
    A = tlx.local_alloc((BM // 2, BK), tl.float16, 2 * S)
    B = tlx.local_alloc((BK, BN), tl.float16, S)
    C = tlx.local_alloc((BM // 2, BN), tl.float16, 2)
    full_A = tlx.alloc_barriers(2 * S)
    full_B = tlx.alloc_barriers(S)
    empty_A = tlx.alloc_barriers(2 * S)
    empty_B = tlx.alloc_barriers(S, arrive_count=2)
    k_tiles = tl.cdiv(K, BK)
    with tlx.async_tasks():
        with tlx.async_task("default"):
            for k in range(k_tiles):
                s, p = tlx.warp_spec.get_bufidx_phase(k, S)
                for half in tl.static_range(2):
                    tlx.barrier_wait(empty_A[s + S * half], p ^ 1)
                    tlx.barrier_expect_bytes(full_A[s + S * half], BM // 2 * BK * 2)
                    tlx.async_descriptor_load(a_desc, A[s + S * half], [m0 + half * (BM // 2), k * BK],
                                              full_A[s + S * half])
                tlx.barrier_wait(empty_B[s], p ^ 1)
                tlx.barrier_expect_bytes(full_B[s], BK * BN * 2)
                tlx.async_descriptor_load(b_desc, B[s], [k * BK, n0], full_B[s])
        with tlx.async_task(num_warps=4, registers=232, replicate=2):
            cid = tlx.async_task_replica_id()
            acc = tl.zeros((BM // 2, BN), dtype=tl.float32)
            for k in range(k_tiles):
                s, p = tlx.warp_spec.get_bufidx_phase(k, S)
                tlx.barrier_wait(full_A[s + S * cid], p)
                tlx.barrier_wait(full_B[s], p)
                acc = tlx.async_dot(A[s + S * cid], B[s], acc)
                acc = tlx.async_dot_wait(0, acc)
                tlx.barrier_arrive(empty_A[s + S * cid])
                tlx.barrier_arrive(empty_B[s])
            tlx.local_store(C[cid], acc.to(tl.float16))
            tlx.fence_async_shared()
            tlx.async_descriptor_store(c_desc, C[cid], [m0 + cid * (BM // 2), n0])
            tlx.async_descriptor_store_wait(0)
