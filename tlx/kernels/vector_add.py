"""Vector add over two warp-specialized tasks: the smallest kernel that exercises async_tasks."""
import triton.language as tl

import tlx


@tlx.jit
def two_task_add(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    """Vector add split over two tasks: the default task takes the first half of each block."""
    base = tl.program_id(0) * BLOCK
    with tlx.async_tasks():
        with tlx.async_task("default"):
            offs = base + tl.arange(0, BLOCK // 2)
            m = offs < n
            tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=m) + tl.load(y_ptr + offs, mask=m), mask=m)
        with tlx.async_task(num_warps=4):
            offs = base + BLOCK // 2 + tl.arange(0, BLOCK // 2)
            m = offs < n
            tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=m) + tl.load(y_ptr + offs, mask=m), mask=m)
