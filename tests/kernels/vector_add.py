"""A two-task vector add: the default task adds the first half of each block, a 4-warp task the second."""
import triton.language as tl

import tlx


@tlx.jit
def two_task_add(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    base = pid * BLOCK
    with tlx.async_tasks():
        with tlx.async_task("default"):
            offs = base + tl.arange(0, BLOCK // 2)
            m = offs < n
            tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=m) + tl.load(y_ptr + offs, mask=m), mask=m)
        with tlx.async_task(num_warps=4):
            offs = base + BLOCK // 2 + tl.arange(0, BLOCK // 2)
            m = offs < n
            tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=m) + tl.load(y_ptr + offs, mask=m), mask=m)
