"""Kernels registered for `python -m tlx check examples/checks.py`: the simulator runs each under
several schedules and reports protocol errors. `buggy_release` releases its buffer before the wgmma
that reads it has retired (it waits on a 1-deep wgmma queue): the report names the rule and the line."""
import torch
import triton.language as tl

import tlx


@tlx.jit
def buggy_release(a_desc, out_ptr, K, BK: tl.constexpr, WAIT_ALL: tl.constexpr):
    a = tlx.local_alloc((64, BK), tl.float16, 2)
    b = tlx.local_alloc((BK, 64), tl.float16, 1)
    full = tlx.alloc_barriers(2)
    empty = tlx.alloc_barriers(2)
    with tlx.async_tasks():
        with tlx.async_task("default"):
            for k in range(tl.cdiv(K, BK)):
                s, p = tlx.warp_spec.get_bufidx_phase(k, 2)
                tlx.barrier_wait(empty[s], p ^ 1)
                tlx.barrier_expect_bytes(full[s], 64 * BK * 2)
                tlx.async_descriptor_load(a_desc, a[s], [0, k * BK], full[s])
        with tlx.async_task(num_warps=4):
            tlx.local_store(b[0], tl.zeros((BK, 64), tl.float16) + 1.0)
            tlx.fence_async_shared()
            acc = tl.zeros((64, 64), tl.float32)
            for k in range(tl.cdiv(K, BK)):
                s, p = tlx.warp_spec.get_bufidx_phase(k, 2)
                tlx.barrier_wait(full[s], p)
                acc = tlx.async_dot(a[s], b[0], acc)
                acc = tlx.async_dot_wait(0 if WAIT_ALL else 1, acc)
                tlx.barrier_arrive(empty[s])          # with WAIT_ALL=False the dot on a[s] may still run
            acc = tlx.async_dot_wait(0, acc)
            tl.store(out_ptr + tl.arange(0, 64)[:, None] * 64 + tl.arange(0, 64)[None, :], acc)


def _args():
    a = torch.randn(64, 256, dtype=torch.float16)
    return (tlx.TensorDescriptor.from_tensor(a, [64, 64]), torch.empty(64 * 64), 256)


TLX_CHECKS = [
    (buggy_release, (1,), _args, {"BK": 64, "WAIT_ALL": True, "num_warps": 4}),
    (buggy_release, (1,), _args, {"BK": 64, "WAIT_ALL": False, "num_warps": 4}),
]
