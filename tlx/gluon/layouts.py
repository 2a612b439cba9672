"""Layout choices. Users never write layouts; every decision of the Gluon lowering lives here."""
from __future__ import annotations

import functools
import math

from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.ampere.mbarrier import MBarrierLayout  # noqa: F401

ELEMENTS_PER_THREAD = 8   # along the contiguous dim; one rule for every dtype keeps seeds consistent


def blocked_for(shape, num_warps: int) -> gl.BlockedLayout:
    """Coalesced default for pointer accesses: 8 elements per thread along the last dim, lanes then
    warps fill the rest. Depends only on the shape, so two anchors of one value never disagree."""
    shape = [int(s) for s in shape]
    rank = len(shape)
    if rank == 0:
        raise ValueError("blocked_for needs a tensor shape")
    size = [1] * rank
    lanes = [1] * rank
    warps = [1] * rank
    size[-1] = min(ELEMENTS_PER_THREAD, shape[-1])
    left_lanes = 32
    for d in reversed(range(rank)):          # lanes: contiguous dim first
        room = max(shape[d] // (size[d] * lanes[d]), 1)
        take = min(room, left_lanes)
        take = 1 << (take.bit_length() - 1)
        lanes[d] *= take
        left_lanes //= take
    lanes[0] *= left_lanes                   # replicate leftovers on the outer dim
    left_warps = num_warps
    for d in range(rank):                    # warps: outer dim first
        room = max(shape[d] // (size[d] * lanes[d] * warps[d]), 1)
        take = min(room, left_warps)
        take = 1 << (take.bit_length() - 1)
        warps[d] *= take
        left_warps //= take
    warps[0] *= left_warps
    return gl.BlockedLayout(size, lanes, warps, list(reversed(range(rank))))


def wgmma_layout(shape, num_warps: int, instr_k: int = 16) -> gl.NVMMADistributedLayout:
    """wgmma accumulator layout for an [M, N] tile computed by `num_warps` warps (Gluon tutorial rule)."""
    m, n = int(shape[0]), int(shape[1])
    warps = [4, 1]
    while warps[0] * warps[1] < num_warps:
        if m >= 16 * warps[0] * 2:
            warps[0] *= 2
        else:
            warps[1] *= 2
    max_n = max(n // warps[1], 8)
    instr_n = 8
    for cand in range(min(256, max_n), 7, -8):
        if n % cand == 0 and cand % 8 == 0:
            instr_n = cand
            break
    return gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=warps, instr_shape=[16, instr_n, instr_k])


def mma_v2_layout(num_warps: int) -> gl.NVMMADistributedLayout:
    return gl.NVMMADistributedLayout(version=[2, 0], warps_per_cta=[num_warps, 1], instr_shape=[16, 8])


def shared_for(shape, dtype) -> gl.SharedLayout:
    """NVMMA swizzle for tiles that TMA or wgmma may touch; a plain layout otherwise."""
    return _shared_for(tuple(int(s) for s in shape), dtype)


@functools.lru_cache(maxsize=1024)   # on every launch with a host descriptor: keep it cheap
def _shared_for(shape: tuple, dtype) -> gl.SharedLayout:
    shape = list(shape)
    bits = dtype.primitive_bitwidth
    if len(shape) >= 2 and bits in (8, 16, 32) and shape[-1] * bits // 8 >= 16 and shape[-2] >= 8:
        return gl.NVMMASharedLayout.get_default_for(shape, dtype)
    return gl.SwizzledSharedLayout(1, 1, 1, list(reversed(range(len(shape)))))


def wgmma_a_operand(shape, dtype, num_warps: int) -> gl.DotOperandLayout:
    """Registers of a wgmma A operand [M, K] (`local_load(buf, layout="wgmma_a")`). The parent accumulator's
    N is not known at the load; A's register layout does not depend on it, so async_dot's conversion to its
    own parent moves no data."""
    return gl.DotOperandLayout(0, wgmma_layout((shape[0], 64), num_warps), k_width(dtype))


def k_width(dtype) -> int:
    """DotOperandLayout k_width for a register A operand of wgmma / mma_v2."""
    return max(32 // dtype.primitive_bitwidth, 1)


def is_mma(layout) -> bool:
    return isinstance(layout, gl.NVMMADistributedLayout)


def nbytes(shape, dtype) -> int:
    return math.prod(int(s) for s in shape) * dtype.primitive_bitwidth // 8
