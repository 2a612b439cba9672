"""`tlx.warp_spec`: ring-buffer helpers (backend-neutral; written with `tl` only)."""
import triton
import triton.language as tl


@triton.jit
def get_bufidx_phase(cnt, NUM_BUFFERS: tl.constexpr):
    """`(cnt % NUM_BUFFERS, (cnt // NUM_BUFFERS) & 1)`: the ring slot and the mbarrier parity of use `cnt`."""
    return cnt % NUM_BUFFERS, (cnt // NUM_BUFFERS) & 1
