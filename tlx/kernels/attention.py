"""Attention forward on Hopper in the TLX surface (FlashAttention-3 structure).

One program computes a BM-row block of queries of one (batch, head): BM=128 (two consumer warp
groups) or BM=192 (three, FlashAttention-3's head-dim-64 tile). The default task is the TMA
producer: it loads Q once as one 64-row box per consumer, then streams K and V blocks through a
STAGES-deep ring (K and V on separate barriers, so QK^T can start before V lands). The consumers
(one task replicated BM // 64 times) each own 64 query rows: S = Q K^T by wgmma from shared memory,
online softmax in registers (exp2, scale folded into log2 domain), O += P V with P fed to wgmma from
registers. Every consumer releases a K/V stage (arrive_count = consumers; RELEASE_K_EARLY releases K
after Q K^T and V after P V), also the blocks its own rows cannot attend, which it skips
(skip_blocks). The output goes back
through Q's shared buffer (Q is dead by then) with a TMA store; LSE (natural log) per row.

Features, each behind a constexpr switch so the plain path compiles to the same loop as before:
- masks: causal is the window (left, 0); a window (left, right) lets query i attend keys
  i-left <= j <= i+right. The program's K/V block range [lo, hi) is computed before the task
  region, so the producer and every consumer agree on the count; each consumer splits it into
  masked boundary blocks [lo, a) and [z, hi) and unmasked blocks [a, z).
- softcap (cap * tanh(s / cap), tanh.approx on the MUFU unit), user `score_mod` / `mask_mod` (@tlx.jit
  functions passed as constexprs, called on the [64, BN] tile with broadcastable index tensors).
- variable lengths ("thd", cu_seqlens): a tile past its sequence's end returns at once; keys past
  the sequence's end (neighbouring rows a TMA box reads) are masked; a tile cut by the end stores
  its rows with masked pointer stores, so it never writes into the next sequence.
- ACTIVATION "gelu" / "silu": O = act(scale * Q K^T) V, no normalization and no LSE.

Tensors are addressed as 2-D row-major views: layout "bhsd" views [B*H*S, D]; "bshd" views
[B*S, H*D] (head h at column h*D); "thd" views [total, H*D]. "bhsd" needs S a multiple of 64 and
of BN (checked; a BM=192 tile may reach past S: its consumers there store nothing); "bshd" of any
lengths (keys may differ from queries) runs as packed "thd" sequences over the same memory.
"""
from __future__ import annotations

import functools
import math
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

LOG2E = 1.4426950408889634
RESCALE_LOG2 = 8.0   # LAZY_RESCALE: the row max may run this far (log2) ahead: P <= 2^8
CONSUMER_ROWS = 64          # query rows per consumer warp group (one m64 wgmma)
WIDE_BN = 192               # BN of pipelined_wide_blocks: 128 + 64 keys per block


def kv_box(BN, CLUSTER=1):
    """Rows per K/V TMA box: the block, or 64 for a WIDE_BN block (boxes are powers of two); CLUSTER=2, half
    the block (each CTA of the cluster loads one half, load_kv_box)."""
    return 64 if BN == WIDE_BN else BN // CLUSTER


@tlx.jit
def kv_block_range(m0, kv_len, win_l, win_r, BM: tl.constexpr, BN: tl.constexpr, BOUND_L: tl.constexpr,
                   BOUND_R: tl.constexpr):
    """[lo, hi): the K/V blocks any of the tile's BM query rows may attend. Computed once, before the
    task region, so the producer and every consumer iterate the same blocks."""
    lo = 0
    hi = kv_len
    if BOUND_L:
        lo = tl.maximum(m0 - win_l, 0) // BN
    if BOUND_R:
        hi = tl.minimum(m0 + BM + win_r, kv_len)
    return lo, tl.maximum(tl.cdiv(hi, BN), lo)


@tlx.jit
def unmasked_range(r0, lo, hi, kv_len, win_l, win_r, ROWS: tl.constexpr, BN: tl.constexpr,
                   BOUND_L: tl.constexpr, BOUND_R: tl.constexpr, MASK_MOD: tl.constexpr):
    """[a, z) inside [lo, hi): the blocks where every (row, key) pair of one consumer's rows
    r0..r0+ROWS-1 is kept, so they skip the mask. [lo, a) and [z, hi) are the masked edges."""
    a = lo
    z = kv_len // BN                                       # a block past the sequence end needs the mask
    if BOUND_L:
        a = tl.cdiv(tl.maximum(r0 + ROWS - 1 - win_l, 0), BN)   # starts at or after the last row's left edge
    if BOUND_R:
        z = tl.minimum(z, (r0 + win_r + 1) // BN)          # ends at or before the first row's right edge
    if MASK_MOD is not None:
        z = a                                              # a user mask can cut any block
    a = tl.minimum(tl.maximum(a, lo), hi)
    return a, tl.minimum(tl.maximum(z, a), hi)


@tlx.jit
def tanh_approx(x):
    """tanh in one MUFU instruction (relative error ~2^-11), as FlashAttention's softcap; it replaced
    1 - 2 / (e^2x + 1), which took an ex2 and a reciprocal per score."""
    return tl.inline_asm_elementwise("tanh.approx.f32 $0, $1;", "=r,r", [x], dtype=tl.float32, is_pure=True, pack=1)


@tlx.jit
def exp2_poly(x):
    """2^x on the FMA and integer pipes instead of the MUFU (FlashAttention-4's exp emulation), for x <= 0:
    j = round(x) by the 1.5 * 2^23 magic add, 2^(x - j) by a degree-3 polynomial on [-0.5, 0.5] (relative
    error 7.5e-5, below bf16's and fp16's rounding of P), then j added to the exponent bits. x below -125
    gives about 2^-125 (no denormal results) instead of less: nothing next to a row maximum's 1."""
    x = tl.maximum(x, -125.0)
    t = x + 12582912.0
    f = x - (t - 12582912.0)
    p = ((0.05517132 * f + 0.24261054) * f + 0.69326099) * f + 0.99992811
    return (p.to(tl.int32, bitcast=True) + (t.to(tl.int32, bitcast=True) << 23)).to(tl.float32, bitcast=True)


@tlx.jit
def exp2_quarter_poly(x):
    """exp2 of a [rows, BN] score tile with a quarter of it by exp2_poly (POLY_EXP2), so the FMA pipes
    take part of the MUFU's work (at D=64 there is one exp per 64 multiply-adds of the tensor cores);
    a quarter balances the MUFU's 8 cycles per warp against exp2_poly's 8 instructions. Every
    reshape, permute and split moves only registers: a wgmma accumulator thread holds two adjacent
    columns in each 8-column chunk, every chunk; the quarter is the second column of every odd chunk.
    Call sites keep a plain tl.exp2 without POLY_EXP2: routing it through a helper changed ptxas's
    register allocation of the default kernels."""
    R: tl.constexpr = x.shape[0]
    N: tl.constexpr = x.shape[1]
    even, odd = tl.split(tl.permute(tl.reshape(x, (R, N // 16, 2, 8)), (0, 1, 3, 2)))   # by chunk parity
    first, second = tl.split(tl.reshape(odd, (R, N // 16, 4, 2)))                         # by column pair
    odd = tl.reshape(tl.join(tl.exp2(first), exp2_poly(second)), (R, N // 16, 8))
    return tl.reshape(tl.permute(tl.join(tl.exp2(even), odd), (0, 1, 3, 2)), (R, N))


@tlx.jit
def transform_scores(qk, j, r0, b, h, sm_scale, softcap, BN: tl.constexpr, SOFTCAP: tl.constexpr,
                     SCORE_MOD: tl.constexpr, ACTIVATION: tl.constexpr):
    """The score tile: log2 units for softmax (exp2 follows), natural units for other activations.
    Softcap and score_mod act on natural-unit scores."""
    if SOFTCAP or SCORE_MOD is not None or ACTIVATION != "softmax":
        s = qk * sm_scale
        if SOFTCAP:                                        # cap * tanh(s / cap)
            s = softcap * tanh_approx(s * (1.0 / softcap))
        if SCORE_MOD is not None:
            rows = r0 + tl.arange(0, qk.shape[0])
            cols = j * BN + tl.arange(0, qk.shape[1])     # a block may hold its first KEYS keys only
            s = SCORE_MOD(s, b, h, rows[:, None], cols[None, :])
        if ACTIVATION == "softmax":
            s = s * LOG2E
    else:
        s = qk * (sm_scale * LOG2E)
    return s


@tlx.jit
def apply_mask(x, fill, j, r0, kv_len, b, h, win_l, win_r, BN: tl.constexpr, BOUND_L: tl.constexpr,
               BOUND_R: tl.constexpr, MASK_MOD: tl.constexpr, VARLEN: tl.constexpr):
    """`x` where the (row, key) pair counts (inside the sequence, the window, mask_mod), else `fill`.
    (Helpers take and return layout-carrying tiles only: Gluon cannot inline a nested helper that
    takes an Auto-layout tensor.)"""
    rows = r0 + tl.arange(0, x.shape[0])
    cols = j * BN + tl.arange(0, x.shape[1])               # a block may hold its first KEYS keys only
    keep = True                                            # fixed lengths: S is a multiple of BN
    if VARLEN:
        keep = keep & (cols[None, :] < kv_len)
    if BOUND_L:
        keep = keep & (cols[None, :] >= rows[:, None] - win_l)
    if BOUND_R:
        keep = keep & (cols[None, :] <= rows[:, None] + win_r)
    if MASK_MOD is not None:
        keep = keep & MASK_MOD(b, h, rows[:, None], cols[None, :])
    return tl.where(keep, x, fill)


@tlx.jit
def activate(s, ACTIVATION: tl.constexpr):
    """Generalized attention's elementwise activation (no normalization)."""
    if ACTIVATION == "gelu":
        p = gelu(s)
    else:                                                  # silu
        p = silu(s)
    return p


@tlx.jit
def wait_turn(cid: tl.constexpr, PINGPONG: tl.constexpr):
    """PINGPONG: wait until consumer `cid` holds the tensor cores (named barrier 8 + cid)."""
    if PINGPONG:
        tlx.named_barrier_wait(8 + cid, 256)


@tlx.jit
def pass_turn(cid: tl.constexpr, CONSUMERS: tl.constexpr, PINGPONG: tl.constexpr):
    """PINGPONG: hand the tensor cores to the next consumer, round robin (two consumers alternate, three
    take turns in order as in FlashAttention-3's head-dim-64 kernel)."""
    if PINGPONG:
        tlx.named_barrier_arrive(8 + (cid + 1) % CONSUMERS, 256)


@tlx.jit
def pipelined_blocks(a, z, lo, q_buf, pin, k_bufs, v_bufs, k_full, v_full, k_empty, kv_empty, m_i, l_i, acc, r0, b,
                     h, sm_scale, softcap, cid: tl.constexpr, CONSUMERS: tl.constexpr, BN: tl.constexpr,
                     STAGES: tl.constexpr, SOFTCAP: tl.constexpr, SCORE_MOD: tl.constexpr, PINGPONG: tl.constexpr,
                     PIN_WAIT: tl.constexpr, P_EARLY: tl.constexpr, LAZY_RESCALE: tl.constexpr,
                     POLY_EXP2: tl.constexpr, RELEASE_K_EARLY: tl.constexpr, LEAN_SYNC: tl.constexpr, rank=0,
                     CLUSTER: tl.constexpr = 1):
    """FlashAttention-3's intra-warpgroup overlap on the unmasked softmax blocks [a, z): Q K^T of block
    j and P V of block j-1 are issued back to back, and the softmax of block j runs while P V j-1 is
    still on the tensor cores. Each iteration drains its wgmmas before the loop edge: a wgmma in
    flight across it made ptxas serialize every wgmma of the kernel (warning C7514), and P's registers
    (P V's A operand) are rewritten only after P V has read them. The body runs once when a < z, as a
    loop of at most one iteration: a loop reconciles the running statistics' layouts across its edge
    (tlx's code generator), a runtime `if` does not yet. Softmax math is inline: Gluon cannot outline a
    helper that takes not-yet-inferred layouts in a loop body.
    PINGPONG: each issue of a block's wgmmas (Q K^T of block a; Q K^T j with P V j-1) is one turn at the
    tensor cores (wait_turn / pass_turn), one per block like attention_block's, so every consumer
    takes the same number of turns.
    PIN_WAIT: nothing in the wait for P V j-1 depends on the softmax, and ptxas 12.8 scheduled it above
    the exps, so they did not overlap P V after all (SASS; docs/design.md). A shared-memory store of
    the new row sums (to `pin`, never read) just before the wait keeps it after them.
    P_EARLY: P is converted to 16 bits before that wait (see attention_block).
    q_buf: Q's shared-memory buffer, or Q in registers (consume_blocks' Q_IN_REGS).
    LAZY_RESCALE (blocks after a), POLY_EXP2, RELEASE_K_EARLY: see attention_block. With RELEASE_K_EARLY
    the loop holds V of block j-1 and K of block j: with two stages the producer refills K j+1 during
    block j instead of after P V j-1 (FlashAttention-3's separate K and V pipelines).
    CLUSTER=2: every stage is released in both CTAs of the cluster (release_in_cluster; both producers
    multicast into it, load_kv)."""
    scale = sm_scale * LOG2E
    dtype = tlx.dtype_of(q_buf)
    for _ in range(a, tl.minimum(a + 1, z)):
        s, p = tlx.warp_spec.get_bufidx_phase(a - lo, STAGES)
        tlx.barrier_wait(k_full[s], p)
        wait_turn(cid, PINGPONG)
        qk = tlx.async_dot(q_buf, tlx.local_trans(k_bufs[s]))
        pass_turn(cid, CONSUMERS, PINGPONG)
        qk = tlx.async_dot_wait(0, qk)
        if RELEASE_K_EARLY:
            release_in_cluster(k_empty[s], rank, LEAN_SYNC, CLUSTER)
        if not SOFTCAP and SCORE_MOD is None:            # raw row max, one FMA per score (as attention_block)
            m_new = tl.maximum(m_i, tl.max(qk, 1) * scale)
            x = qk * scale - m_new[:, None]
            prob = exp2_quarter_poly(x) if POLY_EXP2 else tl.exp2(x)
        else:
            qk = transform_scores(qk, a, r0, b, h, sm_scale, softcap, BN, SOFTCAP, SCORE_MOD, "softmax")
            m_new = tl.maximum(m_i, tl.max(qk, 1))
            prob = tl.exp2(qk - m_new[:, None])
        alpha = tl.exp2(m_i - m_new)
        l_i = l_i * alpha + tl.sum(prob, 1)
        rescale = 1                                       # LAZY_RESCALE: block a always rescales
        m_i = m_new
        p16 = prob.to(dtype)                              # block a's P: its P V goes out with block a+1's Q K^T
        for j in range(a + 1, z):                         # (acc is rescaled right before each P V: touched
            s, p = tlx.warp_spec.get_bufidx_phase(j - lo, STAGES)   # first inside the loop, it takes the
            sp, pp = tlx.warp_spec.get_bufidx_phase(j - 1 - lo, STAGES)   # P V accumulator's layout)
            tlx.barrier_wait(k_full[s], p, warpgroup_sync=not LEAN_SYNC)
            if LAZY_RESCALE:                              # to block j-1's row max, only when it moved
                for _ in range(rescale):                  # (a runtime `if` as a loop, as above)
                    acc = acc * alpha[:, None]
            else:
                acc = acc * alpha[:, None]                # to block j-1's row max
            tlx.barrier_wait(v_full[sp], pp)
            wait_turn(cid, PINGPONG)
            qk = tlx.async_dot(q_buf, tlx.local_trans(k_bufs[s]))
            acc = tlx.async_dot(p16, v_bufs[sp], acc)
            pass_turn(cid, CONSUMERS, PINGPONG)
            qk = tlx.async_dot_wait(1, qk)                # Q K^T of block j done, P V of j-1 in flight
            if RELEASE_K_EARLY:
                release_in_cluster(k_empty[s], rank, LEAN_SYNC, CLUSTER)
            if not SOFTCAP and SCORE_MOD is None:
                qk_scale = scale
            else:
                qk = transform_scores(qk, j, r0, b, h, sm_scale, softcap, BN, SOFTCAP, SCORE_MOD, "softmax")
                qk_scale = 1.0
            m_new = tl.maximum(m_i, tl.max(qk, 1) * qk_scale)
            if LAZY_RESCALE:
                m_new = tl.where(m_new - m_i > RESCALE_LOG2, m_new, m_i)
                rescale = (tl.max(m_new - m_i, 0) > 0).to(tl.int32)   # needed only before the next P V
            x = qk * qk_scale - m_new[:, None]
            prob = exp2_quarter_poly(x) if POLY_EXP2 and SCORE_MOD is None else tl.exp2(x)   # (mods: -inf)
            alpha = tl.exp2(m_i - m_new)
            l_i = l_i * alpha + tl.sum(prob, 1)
            p_new = prob
            if P_EARLY:                                   # (p16 of block j-1 stays P V's operand until the
                p_new = prob.to(dtype)                    # wait: block j's P is a new value)
            if PIN_WAIT:                                  # the row sums to shared memory: ptxas keeps the
                tlx.local_store(pin, l_i)                 # wait below, after the exps (else it hoists it)
            acc = tlx.async_dot_wait(0, acc)              # P V of block j-1 done: its stage is free
            release_in_cluster(kv_empty[sp], rank, LEAN_SYNC, CLUSTER)
            m_i = m_new
            p16 = p_new.to(dtype)
        s, p = tlx.warp_spec.get_bufidx_phase(z - 1 - lo, STAGES)
        if LAZY_RESCALE:
            for _ in range(rescale):
                acc = acc * alpha[:, None]
        else:
            acc = acc * alpha[:, None]
        tlx.barrier_wait(v_full[s], p)
        acc = tlx.async_dot(p16, v_bufs[s], acc)
        acc = tlx.async_dot_wait(0, acc)
        release_in_cluster(kv_empty[s], rank, LEAN_SYNC, CLUSTER)
    return m_i, l_i, acc


@tlx.jit
def wide_softmax(qk0, qk1, m_i, l_i, scale):
    """One online-softmax step over a WIDE_BN block's two score parts: (row max, row sum, the running
    values' rescale factor, P of each part)."""
    m_new = tl.maximum(m_i, tl.maximum(tl.max(qk0, 1), tl.max(qk1, 1)) * scale)
    prob0 = tl.exp2(qk0 * scale - m_new[:, None])
    prob1 = tl.exp2(qk1 * scale - m_new[:, None])
    alpha = tl.exp2(m_i - m_new)
    return m_new, l_i * alpha + (tl.sum(prob0, 1) + tl.sum(prob1, 1)), alpha, prob0, prob1


@tlx.jit
def pipelined_wide_blocks(a, z, lo, q_buf, pin, k_bufs, v_bufs, k_ends, v_ends, k_full, v_full, k_empty, kv_empty, m_i,
                          l_i, acc, sm_scale, cid: tl.constexpr, CONSUMERS: tl.constexpr, STAGES: tl.constexpr,
                          PINGPONG: tl.constexpr, PIN_WAIT: tl.constexpr, P_EARLY: tl.constexpr,
                          RELEASE_K_EARLY: tl.constexpr, LEAN_SYNC: tl.constexpr):
    """pipelined_blocks (plain softmax scores) over WIDE_BN = 192-key blocks, each computed as a 128-key and
    a 64-key part (Gluon tensors have power-of-two shapes): Q K^T and P V are two wgmmas each, the row
    max, the exps' offsets and O's rescale are one per 192 keys instead of one per 128. FlashAttention-3
    runs 176-key blocks at head dim 128 non-causal for that reason; its 240-register consumers hold the
    scores (96 registers here), P (48) and O (64). Two 48 KB K/V stages and one Q buffer fill shared
    memory. Waits: after the four wgmmas of an iteration (Q K^T j in two parts, then P V j-1 in two)
    `async_dot_wait(3)` / `(2)` give the two score parts while P V j-1 runs on."""
    scale = sm_scale * LOG2E
    dtype = tlx.dtype_of(q_buf)
    for _ in range(a, tl.minimum(a + 1, z)):
        s, p = tlx.warp_spec.get_bufidx_phase(a - lo, STAGES)
        tlx.barrier_wait(k_full[s], p)
        wait_turn(cid, PINGPONG)
        qk0 = tlx.async_dot(q_buf, tlx.local_trans(k_bufs[s]))
        qk1 = tlx.async_dot(q_buf, tlx.local_trans(k_ends[s]))
        pass_turn(cid, CONSUMERS, PINGPONG)
        qk0 = tlx.async_dot_wait(1, qk0)
        qk1 = tlx.async_dot_wait(0, qk1)
        if RELEASE_K_EARLY:
            tlx.barrier_arrive(k_empty[s], warpgroup_sync=not LEAN_SYNC)
        m_i, l_i, alpha, prob0, prob1 = wide_softmax(qk0, qk1, m_i, l_i, scale)
        p0 = prob0.to(dtype)                               # block a's P: its P V goes out with block a+1's Q K^T
        p1 = prob1.to(dtype)
        for j in range(a + 1, z):
            s, p = tlx.warp_spec.get_bufidx_phase(j - lo, STAGES)
            sp, pp = tlx.warp_spec.get_bufidx_phase(j - 1 - lo, STAGES)
            tlx.barrier_wait(k_full[s], p, warpgroup_sync=not LEAN_SYNC)
            acc = acc * alpha[:, None]                     # to block j-1's row max
            tlx.barrier_wait(v_full[sp], pp)
            wait_turn(cid, PINGPONG)
            qk0 = tlx.async_dot(q_buf, tlx.local_trans(k_bufs[s]))
            qk1 = tlx.async_dot(q_buf, tlx.local_trans(k_ends[s]))
            acc = tlx.async_dot(p0, v_bufs[sp], acc)
            acc = tlx.async_dot(p1, v_ends[sp], acc)
            pass_turn(cid, CONSUMERS, PINGPONG)
            qk0 = tlx.async_dot_wait(3, qk0)              # Q K^T of block j done, P V of j-1 in flight
            qk1 = tlx.async_dot_wait(2, qk1)
            if RELEASE_K_EARLY:
                tlx.barrier_arrive(k_empty[s], warpgroup_sync=not LEAN_SYNC)
            m_new, l_i, alpha, prob0, prob1 = wide_softmax(qk0, qk1, m_i, l_i, scale)
            n0 = prob0
            n1 = prob1
            if P_EARLY:
                n0 = prob0.to(dtype)
                n1 = prob1.to(dtype)
            if PIN_WAIT:
                tlx.local_store(pin, l_i)
            acc = tlx.async_dot_wait(0, acc)               # P V of block j-1 done: its stage is free
            tlx.barrier_arrive(kv_empty[sp], warpgroup_sync=not LEAN_SYNC)
            m_i = m_new
            p0 = n0.to(dtype)
            p1 = n1.to(dtype)
        s, p = tlx.warp_spec.get_bufidx_phase(z - 1 - lo, STAGES)
        acc = acc * alpha[:, None]
        tlx.barrier_wait(v_full[s], p)
        acc = tlx.async_dot(p0, v_bufs[s], acc)
        acc = tlx.async_dot(p1, v_ends[s], acc)
        acc = tlx.async_dot_wait(0, acc)
        tlx.barrier_arrive(kv_empty[s], warpgroup_sync=not LEAN_SYNC)
    return m_i, l_i, acc


@tlx.jit
def attention_block(j, c, q_buf, k_bufs, v_bufs, k_full, v_full, k_empty, kv_empty, m_i, l_i, acc, r0, b, h, kv_len,
                    sm_scale, softcap, win_l, win_r, cid: tl.constexpr, CONSUMERS: tl.constexpr, BN: tl.constexpr,
                    STAGES: tl.constexpr, MASK: tl.constexpr, PINGPONG: tl.constexpr, BOUND_L: tl.constexpr,
                    BOUND_R: tl.constexpr, SOFTCAP: tl.constexpr, SCORE_MOD: tl.constexpr, MASK_MOD: tl.constexpr,
                    VARLEN: tl.constexpr, ACTIVATION: tl.constexpr, P_EARLY: tl.constexpr, LAZY_RESCALE: tl.constexpr,
                    POLY_EXP2: tl.constexpr, RELEASE_K_EARLY: tl.constexpr, LEAN_SYNC: tl.constexpr,
                    KEYS: tl.constexpr):
    """K/V block j (ring count c) for one consumer: S = Q K^T, scores, mask (MASK: boundary blocks only),
    online softmax or activation, O += P V; releases the stage. PINGPONG: the consumers take turns
    issuing Q K^T (wait_turn / pass_turn), so one group's softmax overlaps another's wgmma; the turn
    passes once the wgmma is issued, not when it completes (the SASS showed the tensor cores idle at
    every hand-off when it passed after the wait).
    P_EARLY: P is converted to 16 bits before the V wait. ptxas otherwise puts the conversions after
    that wait, at the end of the Q K^T -> P V path (longest stretch from the last exp to the P V issue:
    D=128 136 SASS instructions, 105 converted early; D=64 98 and 90).
    LAZY_RESCALE (unmasked plain blocks; FlashAttention-4's conditional rescale): a row's running max
    moves only when the block's scores exceed it by more than RESCALE_LOG2 (log2 units), so P stays
    below 2^8, and the accumulator is rescaled only when some row of the warp group moved, not once per
    block (the rescale is 128 FMUL per thread per 64-key block at D=256, as many as the rest of the
    softmax). The branch needs one flag for the warp group: a reduction over its rows through shared
    memory, which only the rescale waits for, not the exps. m_i and l_i stay consistent: the output
    and LSE are exact.
    POLY_EXP2 (unmasked plain blocks): a quarter of the exps by polynomial (exp2_quarter_poly); masked
    blocks keep the MUFU's exact 0 for -inf.
    RELEASE_K_EARLY: the K stage is released (k_empty) once Q K^T has read it, the V stage (kv_empty) after
    P V; without it kv_empty releases both after P V.
    KEYS: Q K^T and P V over the block's first KEYS keys only (views of the stages' first rows; BN: all):
    the caller knows this consumer's rows attend none of the others (HALF_DIAGONAL's BN // 2), or they
    are the sequence's last keys (a 192-key WIDE block's 64- or 128-key tail). The stage is waited for
    and released as a whole, like every block's."""
    s, p = tlx.warp_spec.get_bufidx_phase(c, STAGES)
    k_buf = k_bufs[s]
    v_buf = v_bufs[s]
    if KEYS != BN:
        k_buf = tlx.local_slice(k_buf, (0, 0), (KEYS, k_buf.shape[1]))
        v_buf = tlx.local_slice(v_buf, (0, 0), (KEYS, v_buf.shape[1]))
    tlx.barrier_wait(k_full[s], p)
    wait_turn(cid, PINGPONG)
    qk = tlx.async_dot(q_buf, tlx.local_trans(k_buf))
    pass_turn(cid, CONSUMERS, PINGPONG)                  # once issued (as FA3): the next QK queues behind it
    qk = tlx.async_dot_wait(0, qk)
    if RELEASE_K_EARLY:                                  # Q K^T has read K: the producer may refill it
        tlx.barrier_arrive(k_empty[s], warpgroup_sync=not LEAN_SYNC)
    if ACTIVATION == "softmax" and not MASK and not SOFTCAP and SCORE_MOD is None:
        # plain scores (scale >= 0, checked on the host): the row max of the raw Q K^T scaled once per
        # row, then one FMA per score inside exp2 (FlashAttention-3's form; no separate scaling pass)
        scale = sm_scale * LOG2E
        m_new = tl.maximum(m_i, tl.max(qk, 1) * scale)
        if LAZY_RESCALE:                                 # a row keeps its max until it runs 2^8 ahead
            m_new = tl.where(m_new - m_i > RESCALE_LOG2, m_new, m_i)
        x = qk * scale - m_new[:, None]
        prob = exp2_quarter_poly(x) if POLY_EXP2 else tl.exp2(x)
        alpha = tl.exp2(m_i - m_new)
        l_i = l_i * alpha + tl.sum(prob, 1)
        if LAZY_RESCALE:                                 # any row of the warp group moved: one branch for all
            for _ in range((tl.max(m_new - m_i, 0) > 0).to(tl.int32)):   # (a runtime `if` as a loop, see
                acc = acc * alpha[:, None]                                # pipelined_blocks)
        else:
            acc = acc * alpha[:, None]
        m_i = m_new
    elif ACTIVATION == "softmax":
        qk = transform_scores(qk, j, r0, b, h, sm_scale, softcap, BN, SOFTCAP, SCORE_MOD, ACTIVATION)
        if MASK:
            qk = apply_mask(qk, float("-inf"), j, r0, kv_len, b, h, win_l, win_r, BN, BOUND_L, BOUND_R,
                            MASK_MOD, VARLEN)
        m_new = tl.maximum(m_i, tl.max(qk, 1))
        if MASK and (BOUND_L or MASK_MOD is not None or VARLEN):
            m_use = tl.where(m_new == float("-inf"), 0.0, m_new)   # a row kept nothing yet: no -inf - -inf
        else:
            m_use = m_new
        prob = tl.exp2(qk - m_use[:, None])
        alpha = tl.exp2(m_i - m_use)
        l_i = l_i * alpha + tl.sum(prob, 1)
        acc = acc * alpha[:, None]
        m_i = m_new
    else:
        qk = transform_scores(qk, j, r0, b, h, sm_scale, softcap, BN, SOFTCAP, SCORE_MOD, ACTIVATION)
        prob = activate(qk, ACTIVATION)
        if MASK:
            prob = apply_mask(prob, 0.0, j, r0, kv_len, b, h, win_l, win_r, BN, BOUND_L, BOUND_R, MASK_MOD,
                              VARLEN)
    if P_EARLY:
        prob = prob.to(tlx.dtype_of(q_buf))
    tlx.barrier_wait(v_full[s], p)
    acc = tlx.async_dot(prob.to(tlx.dtype_of(q_buf)), v_buf, acc)
    acc = tlx.async_dot_wait(0, acc)
    tlx.barrier_arrive(kv_empty[s], warpgroup_sync=not LEAN_SYNC)
    return m_i, l_i, acc


@tlx.jit
def store_rows(o_ptr, buf, row, col, n_valid, O_STRIDE, ROWS: tl.constexpr, D: tl.constexpr):
    """The first n_valid rows of `buf` to o[row.., col..] with masked pointer stores, 16 rows at a time
    (a 64-bit pointer per element: a whole 64-row tile of them would not fit in registers)."""
    CHUNK: tl.constexpr = 16
    for c0 in tl.static_range(0, ROWS, CHUNK):
        vals = tlx.local_load(tlx.local_slice(buf, [c0, 0], [CHUNK, D]))
        r = c0 + tl.arange(0, CHUNK)
        offs = (row + r).to(tl.int64)[:, None] * O_STRIDE + col + tl.arange(0, D)[None, :]
        tl.store(o_ptr + offs, vals, mask=(r < n_valid)[:, None])


@tlx.jit
def store_output(out, o_desc, o_ptr, buf, row, col, n_valid, O_STRIDE, ROWS: tl.constexpr, D: tl.constexpr,
                 VARLEN: tl.constexpr, OWN_BUFFER: tl.constexpr):
    """Output rows through shared memory: Q's buffer (Q is dead; the store is waited for, since the
    producer refills the buffer next) or, OWN_BUFFER, the consumer's own output buffer (the store runs
    on while the next tile computes; the wait comes before the buffer is written again). A tile cut by
    its sequence's end takes masked pointer stores: a TMA box would overwrite the next sequence's
    rows. Fixed lengths are multiples of ROWS, so a consumer's rows are all inside (TMA store) or all
    past the end (a BM=192 tile over S=2^k: nothing to store)."""
    if OWN_BUFFER:
        tlx.async_descriptor_store_wait(0)              # the previous tile's store has read the buffer
    tlx.local_store(buf, out)
    tlx.fence_async_shared()
    if n_valid >= ROWS:
        tlx.async_descriptor_store(o_desc, buf, [row, col])
    elif VARLEN:
        store_rows(o_ptr, buf, row, col, n_valid, O_STRIDE, ROWS, D)
    if not OWN_BUFFER:
        tlx.async_descriptor_store_wait(0)


@tlx.jit
def sequence_bounds(b, cu_q, cu_k, S_Q, S_K, ROW_B, KV_ROW_B, VARLEN: tl.constexpr):
    """(first q row, q length, first k row, k length) of sequence b: from the prefix sums (packed
    "thd"), or fixed lengths at b * ROW_B."""
    if VARLEN:
        q_start = tl.load(cu_q + b)
        q_len = tl.load(cu_q + b + 1) - q_start
        k_start = tl.load(cu_k + b)
        kv_len = tl.load(cu_k + b + 1) - k_start
    else:
        q_start = b * ROW_B
        q_len = S_Q
        k_start = b * KV_ROW_B
        kv_len = S_K
    return q_start, q_len, k_start, kv_len


@tlx.jit
def consumer_range(r0, lo, hi, win_l, win_r, ROWS: tl.constexpr, BN: tl.constexpr, BOUND_L: tl.constexpr,
                   BOUND_R: tl.constexpr):
    """[lo_c, hi_c) inside the tile's [lo, hi): the blocks that hold a key some row r0..r0+ROWS-1 of this
    consumer attends. The tile's range covers all BM rows, so with BN below BM (or a right window) the
    first consumer's causal range ends a block early; a sliding window's left edge moves the same way."""
    lo_c = lo
    hi_c = hi
    if BOUND_L:
        lo_c = tl.minimum(tl.maximum(tl.maximum(r0 - win_l, 0) // BN, lo), hi)
    if BOUND_R:
        hi_c = tl.minimum(tl.maximum((r0 + ROWS - 1 + win_r) // BN + 1, lo_c), hi)
    return lo_c, hi_c


@tlx.jit
def skip_blocks(j0, j1, ring_lo, k_full, v_full, k_empty, kv_empty, cid: tl.constexpr, CONSUMERS: tl.constexpr,
                STAGES: tl.constexpr, PINGPONG: tl.constexpr, RELEASE_K_EARLY: tl.constexpr):
    """Blocks [j0, j1) in which the mask drops every (row, key) pair of this consumer: nothing to compute,
    but the stage still counts this consumer's release (the others read it) and, with PINGPONG, its turn
    passes on. Both waits stay, though nothing is read (the simulator reported each race):
    - V's: V lands only after the producer saw the stage's previous block released by every consumer.
      Releasing before that would complete the earlier phase while another consumer still reads the
      block; K's wait is not enough with RELEASE_K_EARLY, which lets K land first.
    - K's: an mbarrier wait tests one phase bit. A phase this consumer never waited for could still be
      open when it waits for the next one, whose bit then reads as done: it would read K of a later
      block before it lands."""
    for j in range(j0, j1):
        s, p = tlx.warp_spec.get_bufidx_phase(j - ring_lo, STAGES)
        tlx.barrier_wait(k_full[s], p)
        tlx.barrier_wait(v_full[s], p)
        wait_turn(cid, PINGPONG)
        pass_turn(cid, CONSUMERS, PINGPONG)
        if RELEASE_K_EARLY:
            tlx.barrier_arrive(k_empty[s])
        tlx.barrier_arrive(kv_empty[s])


@tlx.jit
def block_loop(j0, j1, ring_lo, q_buf, k_bufs, v_bufs, k_full, v_full, k_empty, kv_empty, m_i, l_i, acc, r0, b, h,
               kv_len, sm_scale, softcap, win_l, win_r, cid: tl.constexpr, CONSUMERS: tl.constexpr, BN: tl.constexpr,
               STAGES: tl.constexpr, MASK: tl.constexpr, PINGPONG: tl.constexpr, BOUND_L: tl.constexpr,
               BOUND_R: tl.constexpr, SOFTCAP: tl.constexpr, SCORE_MOD: tl.constexpr, MASK_MOD: tl.constexpr,
               VARLEN: tl.constexpr, ACTIVATION: tl.constexpr, P_EARLY: tl.constexpr, LAZY_RESCALE: tl.constexpr,
               POLY_EXP2: tl.constexpr, RELEASE_K_EARLY: tl.constexpr, LEAN_SYNC: tl.constexpr,
               KEYS: tl.constexpr):
    """attention_block over blocks [j0, j1) (block j at ring count j - ring_lo), masked or not; KEYS: only
    each block's first KEYS keys (see consume_blocks)."""
    for j in range(j0, j1):
        m_i, l_i, acc = attention_block(j, j - ring_lo, q_buf, k_bufs, v_bufs, k_full, v_full, k_empty, kv_empty,
                                        m_i, l_i, acc, r0, b, h, kv_len, sm_scale, softcap, win_l, win_r, cid,
                                        CONSUMERS, BN, STAGES, MASK, PINGPONG, BOUND_L, BOUND_R, SOFTCAP, SCORE_MOD,
                                        MASK_MOD, VARLEN, ACTIVATION, P_EARLY, LAZY_RESCALE, POLY_EXP2,
                                        RELEASE_K_EARLY, LEAN_SYNC, KEYS)
    return m_i, l_i, acc


@tlx.jit
def consume_blocks(q_bufs, q_slot, opaque_zero, pin, k_bufs, v_bufs, k_ends, v_ends, k_full, v_full, k_empty, kv_empty,
                   lo, hi, c0, r0, b, h, kv_len, sm_scale, softcap, win_l, win_r, cid: tl.constexpr,
                   CONSUMERS: tl.constexpr, ROWS: tl.constexpr, D: tl.constexpr, BN: tl.constexpr, STAGES: tl.constexpr,
                   PINGPONG: tl.constexpr, BOUND_L: tl.constexpr, BOUND_R: tl.constexpr, SOFTCAP: tl.constexpr,
                   SCORE_MOD: tl.constexpr, MASK_MOD: tl.constexpr, VARLEN: tl.constexpr, ACTIVATION: tl.constexpr,
                   PIPELINE: tl.constexpr, PIN_WAIT: tl.constexpr, P_EARLY: tl.constexpr, LAZY_RESCALE: tl.constexpr,
                   POLY_EXP2: tl.constexpr, RELEASE_K_EARLY: tl.constexpr, SKIP_BLOCKS: tl.constexpr,
                   LEAN_SYNC: tl.constexpr, HALF_DIAGONAL: tl.constexpr, live, SKIP_DEAD: tl.constexpr,
                   Q_IN_REGS: tl.constexpr, rank=0, CLUSTER: tl.constexpr = 1):
    """One consumer's pass over K/V blocks [lo, hi), block lo at ring count c0: blocks its rows cannot
    attend (skip_blocks), masked left edge, unmasked inside, masked right edge (diagonal, sequence end),
    skipped blocks. Returns (row max, row sum, acc); the edge loops exist only when a mask can apply.
    PIPELINE: the unmasked blocks overlap softmax with wgmma (pipelined_blocks). HALF_DIAGONAL: where this
    consumer's rows attend no key past the first half of its last block (consumer 0 of a 128-row tile on a
    128-key causal diagonal), that block runs at BN // 2 keys: a quarter of a diagonal tile's wgmma and
    exp work gone (at 1024 causal keys about 1/18 of the tile's). SKIP_BLOCKS (set on the
    host where a consumer's range can be shorter than the tile's, see skip_blocks_possible): without it
    the skip loops are not compiled at all. SKIP_DEAD (set on the host where a tile can reach past its
    sequence's end): a consumer whose rows all lie past it (`live` false: a 192-row tile's last 64 or 128
    rows at S = 2^k) computes nothing and only passes every block on (skip_blocks); otherwise it ran the
    whole tile, its share of the tensor cores included, for rows that are never stored.
    Q is q_bufs[q_slot]; each edge loop indexes it with `opaque_zero` added (a kernel argument that is
    0 at run time, or a literal 0 with one Q buffer), so no compiler can prove the loops read the same
    buffer. With two Q buffers (a runtime slot) ptxas 12.8 otherwise set Q's wgmma descriptor in one
    loop's preheader and read it in the next: a zero-trip first loop left the previous tile's Q
    (wrong causal results on the H200; `wgmma_desc_unset` in the compile report finds it).
    Q_IN_REGS: Q is loaded once into wgmma's A-operand registers and every loop's Q K^T reads it there, not
    from shared memory: a third less shared-memory operand traffic per Q K^T at D=128, and energy is what
    bounds the clock (this kernel and cuDNN's both run at the card's 700 W limit, bench/clock_probe.py).
    CLUSTER=2 (plain non-causal fixed lengths with PIPELINE only, checked on the host): the pipelined loop
    releases every stage in both CTAs of the cluster; no other loop runs there."""
    if ACTIVATION == "softmax":                                      # running row max and sum
        m_i = tl.full((ROWS,), float("-inf"), tl.float32)
        l_i = tl.zeros((ROWS,), tl.float32)
    else:                                                            # none (an unused tile has no layout)
        m_i = 0.0
        l_i = 0.0
    acc = tl.zeros((ROWS, D), tl.float32)
    ring_lo = lo - c0                                                # block j sits at ring count j - ring_lo
    a, z = unmasked_range(r0, lo, hi, kv_len, win_l, win_r, ROWS, BN, BOUND_L, BOUND_R, MASK_MOD)
    lo_c = lo                                                        # this consumer's blocks
    hi_c = hi
    if SKIP_BLOCKS:
        lo_c, hi_c = consumer_range(r0, lo, hi, win_l, win_r, ROWS, BN, BOUND_L, BOUND_R)
    if SKIP_DEAD:                                                    # every range empty: the last skip_blocks
        lo_c = tl.where(live, lo_c, lo)                              # below passes [lo, hi) on
        a = tl.where(live, a, lo)
        z = tl.where(live, z, lo)
        hi_c = tl.where(live, hi_c, lo)
    if SKIP_BLOCKS and BOUND_L:
        skip_blocks(lo, lo_c, ring_lo, k_full, v_full, k_empty, kv_empty, cid, CONSUMERS, STAGES, PINGPONG,
                    RELEASE_K_EARLY)
    q_buf = q_bufs[q_slot]
    if Q_IN_REGS:
        q_buf = tlx.local_load(q_buf, layout="wgmma_a")
    if BOUND_L or MASK_MOD is not None:
        q_edge = q_buf if Q_IN_REGS else q_bufs[q_slot + opaque_zero]
        m_i, l_i, acc = block_loop(lo_c, a, ring_lo, q_edge, k_bufs, v_bufs, k_full, v_full,
                                   k_empty, kv_empty, m_i, l_i, acc, r0, b, h, kv_len, sm_scale, softcap, win_l, win_r,
                                   cid, CONSUMERS, BN, STAGES, True, PINGPONG, BOUND_L, BOUND_R, SOFTCAP, SCORE_MOD,
                                   MASK_MOD, VARLEN, ACTIVATION, P_EARLY, LAZY_RESCALE, POLY_EXP2, RELEASE_K_EARLY,
                                   LEAN_SYNC, BN)
    if BN == WIDE_BN:                                                # (plain non-causal fixed lengths only)
        m_i, l_i, acc = pipelined_wide_blocks(a, z, ring_lo, q_buf, pin, k_bufs, v_bufs, k_ends, v_ends, k_full, v_full,
                                              k_empty, kv_empty, m_i, l_i, acc, sm_scale, cid, CONSUMERS, STAGES,
                                              PINGPONG, PIN_WAIT, P_EARLY, RELEASE_K_EARLY, LEAN_SYNC)
        for tail in tl.static_range(64, WIDE_BN, 64):               # the last block's 64 or 128 keys, if any:
            has_tail = kv_len - z * BN == tail                       # a loop of zero or one block each
            if SKIP_DEAD:
                has_tail = has_tail & (z < hi_c)                     # (none for a dead consumer)
            has_tail = has_tail.to(tl.int32)
            m_i, l_i, acc = block_loop(z, z + has_tail, ring_lo, q_buf, k_bufs, v_bufs, k_full, v_full, k_empty,
                                       kv_empty, m_i, l_i, acc, r0, b, h, kv_len, sm_scale, softcap, win_l, win_r, cid,
                                       CONSUMERS, BN, STAGES, False, PINGPONG, BOUND_L, BOUND_R, SOFTCAP, SCORE_MOD,
                                       MASK_MOD, VARLEN, ACTIVATION, P_EARLY, LAZY_RESCALE, POLY_EXP2,
                                       RELEASE_K_EARLY, LEAN_SYNC, tail)
    elif PIPELINE:
        m_i, l_i, acc = pipelined_blocks(a, z, ring_lo, q_buf, pin, k_bufs, v_bufs, k_full, v_full, k_empty, kv_empty,
                                         m_i, l_i, acc, r0, b, h, sm_scale, softcap, cid, CONSUMERS, BN, STAGES,
                                         SOFTCAP, SCORE_MOD, PINGPONG, PIN_WAIT, P_EARLY, LAZY_RESCALE, POLY_EXP2,
                                         RELEASE_K_EARLY, LEAN_SYNC, rank, CLUSTER)
    else:
        m_i, l_i, acc = block_loop(a, z, ring_lo, q_buf, k_bufs, v_bufs, k_full, v_full, k_empty, kv_empty, m_i, l_i,
                                   acc, r0, b, h, kv_len, sm_scale, softcap, win_l, win_r, cid, CONSUMERS, BN, STAGES,
                                   False, PINGPONG, BOUND_L, BOUND_R, SOFTCAP, SCORE_MOD, MASK_MOD, VARLEN, ACTIVATION,
                                   P_EARLY, LAZY_RESCALE, POLY_EXP2, RELEASE_K_EARLY, LEAN_SYNC, BN)
    # with BN == BM (tiles start on block edges) a causal mask ends only consumer 0's rows in a block's
    # first half: the others get no half-block code (under a right window theirs then run whole)
    HALF: tl.constexpr = HALF_DIAGONAL and (cid == 0 or BN != ROWS * CONSUMERS)
    if BOUND_R or VARLEN or MASK_MOD is not None:
        z_full = hi_c                                                # right-edge blocks taken whole
        if HALF:                                                     # the last one by its first half, where
            last_key = r0 + ROWS - 1 + win_r                         # this consumer's rows attend no later key
            if VARLEN:
                last_key = tl.minimum(last_key, kv_len - 1)
            z_full = hi_c - ((hi_c > z) & (last_key < (hi_c - 1) * BN + BN // 2)).to(tl.int32)
        q_edge = q_buf if Q_IN_REGS else q_bufs[q_slot + 2 * opaque_zero]
        m_i, l_i, acc = block_loop(z, z_full, ring_lo, q_edge, k_bufs, v_bufs, k_full,
                                   v_full, k_empty, kv_empty, m_i, l_i, acc, r0, b, h, kv_len, sm_scale, softcap,
                                   win_l, win_r, cid, CONSUMERS, BN, STAGES, True, PINGPONG, BOUND_L, BOUND_R, SOFTCAP,
                                   SCORE_MOD, MASK_MOD, VARLEN, ACTIVATION, P_EARLY, LAZY_RESCALE, POLY_EXP2,
                                   RELEASE_K_EARLY, LEAN_SYNC, BN)
        if HALF:                                                     # zero or one block (a loop reconciles the
            q_edge = q_buf if Q_IN_REGS else q_bufs[q_slot + 3 * opaque_zero]
            m_i, l_i, acc = block_loop(z_full, hi_c, ring_lo, q_edge, k_bufs, v_bufs, k_full,
                                       v_full, k_empty, kv_empty, m_i, l_i, acc, r0, b, h, kv_len, sm_scale, softcap,
                                       win_l, win_r, cid, CONSUMERS, BN, STAGES, True, PINGPONG, BOUND_L, BOUND_R,
                                       SOFTCAP, SCORE_MOD, MASK_MOD, VARLEN, ACTIVATION, P_EARLY, LAZY_RESCALE,
                                       POLY_EXP2, RELEASE_K_EARLY, LEAN_SYNC, BN // 2)  # half-width rows' layouts)
    if (SKIP_BLOCKS and BOUND_R) or SKIP_DEAD:
        skip_blocks(hi_c, hi, ring_lo, k_full, v_full, k_empty, kv_empty, cid, CONSUMERS, STAGES, PINGPONG,
                    RELEASE_K_EARLY)
    return m_i, l_i, acc


@tlx.jit
def program_tiles(NUM_TILES, tile_table, PERSISTENT: tl.constexpr, BALANCED: tl.constexpr):
    """(how many tiles this program runs, where its list starts in tile_table). One; (persistent) its share
    of the rounds tile_of deals; (BALANCED) the count of its row of the host's table (balanced_tiles: the
    program offsets, then every program's tile numbers)."""
    row = tile_table                                         # (unused unless BALANCED)
    if PERSISTENT:
        n_prog = tl.num_programs(0)
        p = tl.program_id(0)
        if BALANCED:
            first = tl.load(tile_table + p)
            n = tl.load(tile_table + p + 1) - first
            row = tile_table + (n_prog + 1) + first
        else:
            last = tl.cdiv(NUM_TILES, n_prog) - 1            # the last round may be partial
            rem = NUM_TILES - last * n_prog
            gets = tl.where(last % 2 == 0, p < rem, p >= n_prog - rem)
            n = last + gets.to(tl.int32)
    else:
        n = 1
    return n, row


@tlx.jit
def tile_of(k, NUM_M, H, row, BM: tl.constexpr, PERSISTENT: tl.constexpr, LONGEST_FIRST: tl.constexpr,
            BALANCED: tl.constexpr, t_ahead=0, PREFETCH: tl.constexpr = False):
    """(first query row, batch, head) of this program's k-th tile. Non-persistent: the grid's (m block,
    batch * head). Persistent: tiles t = bh * NUM_M + i dealt in rounds of num_programs, odd rounds in
    reverse (snake), so a program's long and short causal tiles pair up; neighbouring programs share a
    head's K/V in L2. LONGEST_FIRST (right-bounded masks): later rows attend more keys, run them first.
    A block-by-block order over all heads (each round one tile length) balanced causal D=256 better
    (+25-48% at S >= 8192) but lost the L2 sharing: D=64/128 causal at S <= 8192 ran 5-20% slower
    (attention-run5 against run6/7). BALANCED: tile number k of the program's `row` of the host's table
    (program_tiles), in the order the host chose; PREFETCH: that number is t_ahead, read a tile ahead
    (prefetch_tile)."""
    if PERSISTENT:
        if BALANCED and PREFETCH:
            t = t_ahead
        elif BALANCED:
            t = tl.load(row + k)
        else:
            n_prog = tl.num_programs(0)
            p = tl.program_id(0)
            t = k * n_prog + tl.where(k % 2 == 0, p, n_prog - 1 - p)
        bh = t // NUM_M
        m_block = t % NUM_M
    else:
        bh = tl.program_id(1)
        m_block = tl.program_id(0)
    if LONGEST_FIRST and not BALANCED:                     # (the host's table holds the row blocks as run)
        m_block = NUM_M - 1 - m_block
    return m_block * BM, bh // H, bh % H


@tlx.jit
def prefetch_tile(n, row, k, PREFETCH: tl.constexpr):
    """PREFETCH (BALANCED): tile number k of the program's row of the host's table (0 past its n tiles), read
    while the tile before runs: a tile's first wgmma otherwise waits for this load (its blocks depend on it),
    while its Q usually landed long before."""
    t = 0
    if PREFETCH:
        t = tl.load(row + k, mask=k < n, other=0)
    return t


@tlx.jit
def tile_rows(m0, b, h, cu_q, cu_k, win_l, win_r, S_Q, S_K, KV_GROUP, ROW_B, ROW_H, COL_H, KV_ROW_B, KV_ROW_H,
              KV_COL_H, BM: tl.constexpr, BN: tl.constexpr, BOUND_L: tl.constexpr, BOUND_R: tl.constexpr,
              VARLEN: tl.constexpr):
    """Where a tile's operands live: (q start, q length, kv length, q row, q col, kv row, kv col, first
    and end K/V block). The producer and every consumer compute the same values."""
    hk = h // KV_GROUP
    q_start, q_len, k_start, kv_len = sequence_bounds(b, cu_q, cu_k, S_Q, S_K, ROW_B, KV_ROW_B, VARLEN)
    lo, hi = kv_block_range(m0, kv_len, win_l, win_r, BM, BN, BOUND_L, BOUND_R)
    return (q_start, q_len, kv_len, q_start + h * ROW_H + m0, h * COL_H, k_start + hk * KV_ROW_H, hk * KV_COL_H,
            lo, hi)


TRACE_TILES = 64     # TRACE: tiles stamped per program (later ones are dropped)
TRACE_STAMPS = 4     # per tile and consumer: start, Q landed, K/V blocks done, output stored


@tlx.jit
def stamp_tile(trace_ptr, cid, k, stamp, CONSUMERS: tl.constexpr, TRACE: tl.constexpr):
    """TRACE: the global nanosecond timer into trace[program, consumer, tile k, stamp]
    (bench/attention_trace.py reads it)."""
    if TRACE:
        slot = ((tl.program_id(0) * CONSUMERS + cid) * TRACE_TILES + k) * TRACE_STAMPS + stamp
        tl.store(trace_ptr + slot, tlx.globaltimer(), mask=k < TRACE_TILES)


@tlx.jit
def tile_in_order(t, NUM_M, BH, H, HEAD_GROUP, BM: tl.constexpr, LONGEST_FIRST: tl.constexpr):
    """(first query row, batch, head) of tile t of the DYNAMIC order: heads in groups of HEAD_GROUP
    (launch_args sizes a group's K/V to share L2), inside a group the tiles of one length for every head in
    turn, longest first (LONGEST_FIRST: later rows attend more keys). Programs take tiles in this order as
    they finish (list scheduling): the long tiles start early and the short ones fill the end."""
    g = t // (HEAD_GROUP * NUM_M)
    first = g * HEAD_GROUP
    heads = tl.minimum(HEAD_GROUP, BH - first)             # the last group may be smaller
    i = t - first * NUM_M
    bh = first + i % heads
    m_block = i // heads
    if LONGEST_FIRST:
        m_block = NUM_M - 1 - m_block
    return m_block * BM, bh // H, bh % H


@tlx.jit
def load_q(k, m0, b, h, q_desc, q_bufs, q_full, q_empty, tile_ids, q_row, q_col, ROWS: tl.constexpr, D: tl.constexpr,
           CONSUMERS: tl.constexpr, Q_BUFS: tl.constexpr, PERSISTENT: tl.constexpr, DYNAMIC: tl.constexpr):
    """Producer: the k-th tile's Q, a box per consumer, into its Q buffer once it stored its tile k - Q_BUFS
    (persistent). DYNAMIC: the tile's first row, batch and head go into tile_ids with it (the consumer
    reads them after the Q wait: no index arithmetic between its tiles)."""
    qs, qp = tlx.warp_spec.get_bufidx_phase(k, Q_BUFS)
    for c in tl.static_range(CONSUMERS):
        slot = c + CONSUMERS * qs
        if PERSISTENT:
            tlx.barrier_wait(q_empty[slot], qp ^ 1)              # consumer c stored its tile k - Q_BUFS
        if DYNAMIC:
            send_tile(tile_ids, slot, m0, b, h)
        tlx.barrier_expect_bytes(q_full[slot], ROWS * D * tlx.size_of(tlx.dtype_of(q_desc)))
        tlx.async_descriptor_load(q_desc, q_bufs[slot], [q_row + c * ROWS, q_col], q_full[slot])


@tlx.jit
def kv_part(buf, end, part: tl.constexpr, BOX: tl.constexpr, BN: tl.constexpr, D: tl.constexpr):
    """Keys part..part+BOX of a K/V stage: the stage's buffer when one box fills it; in a WIDE_BN stage, a
    64-row view of its first 128 keys (`buf`) or its last 64 (`end`); else (CLUSTER=2's halves) a view of `buf`."""
    if BOX == BN:
        view = buf
    elif BN == WIDE_BN and part >= 128:
        view = end
    else:
        view = tlx.local_slice(buf, (part, 0), (BOX, D))
    return view


@tlx.jit
def load_kv_box(desc, view, row, col, bar, box: tl.constexpr, rank, CLUSTER: tl.constexpr):
    """TMA box number `box` of a K/V block into `view` of its stage: this CTA's load or, CLUSTER=2, only the
    box of this CTA's rank, multicast into the same stage of both CTAs (the other CTA loads the other box
    into both), so the block crosses from L2 once per cluster and each CTA's full barrier still receives
    all of it."""
    if CLUSTER > 1:
        if box == rank:
            tlx.async_descriptor_load(desc, view, [row, col], bar, multicast_targets=[0, 1])
    else:
        tlx.async_descriptor_load(desc, view, [row, col], bar)


@tlx.jit
def load_kv(cnt, lo, hi, k_desc, v_desc, k_bufs, v_bufs, k_ends, v_ends, k_full, v_full, k_empty, kv_empty, kv_row,
            kv_col, BN: tl.constexpr, D: tl.constexpr, STAGES: tl.constexpr, RELEASE_K_EARLY: tl.constexpr, rank=0,
            CLUSTER: tl.constexpr = 1):
    """Producer: a tile's K/V blocks lo..hi into the ring (cnt blocks loaded before), each stage once the
    consumers released it: K's (k_empty) and V's (kv_empty) separately with RELEASE_K_EARLY. A WIDE_BN block
    arrives as three 64-row boxes (TMA boxes, like Gluon tensors, have power-of-two shapes): two into its
    k_bufs / v_bufs stage, one into its k_ends / v_ends stage. CLUSTER=2: a block arrives as two halves,
    one from each CTA's producer (load_kv_box); the empty barriers count both CTAs' consumers."""
    BOX: tl.constexpr = 64 if BN == WIDE_BN else BN // CLUSTER     # (kv_box on the host)
    for j in range(lo, hi):
        s, p = tlx.warp_spec.get_bufidx_phase(cnt + j - lo, STAGES)
        tlx.barrier_wait(k_empty[s], p ^ 1)
        tlx.barrier_expect_bytes(k_full[s], BN * D * tlx.size_of(tlx.dtype_of(k_desc)))
        for part in tl.static_range(0, BN, BOX):
            load_kv_box(k_desc, kv_part(k_bufs[s], k_ends[s], part, BOX, BN, D), kv_row + j * BN + part, kv_col,
                        k_full[s], part // BOX, rank, CLUSTER)
        if RELEASE_K_EARLY:
            tlx.barrier_wait(kv_empty[s], p ^ 1)
        tlx.barrier_expect_bytes(v_full[s], BN * D * tlx.size_of(tlx.dtype_of(v_desc)))
        for part in tl.static_range(0, BN, BOX):
            load_kv_box(v_desc, kv_part(v_bufs[s], v_ends[s], part, BOX, BN, D), kv_row + j * BN + part, kv_col,
                        v_full[s], part // BOX, rank, CLUSTER)


@tlx.jit
def produce_tile(k, cnt, m0, b, h, last_fetch, tile_counter, q_desc, k_desc, v_desc, q_bufs, k_bufs, v_bufs, k_ends,
                 v_ends, q_full, q_empty, k_full, v_full, k_empty, kv_empty, tile_ids, cu_q, cu_k, win_l, win_r, S_Q,
                 S_K, KV_GROUP, ROW_B, ROW_H, COL_H, KV_ROW_B, KV_ROW_H, KV_COL_H, D: tl.constexpr, BM: tl.constexpr,
                 BN: tl.constexpr, STAGES: tl.constexpr, BOUND_L: tl.constexpr, BOUND_R: tl.constexpr,
                 VARLEN: tl.constexpr, CONSUMERS: tl.constexpr, Q_BUFS: tl.constexpr, PERSISTENT: tl.constexpr,
                 DYNAMIC: tl.constexpr, RELEASE_K_EARLY: tl.constexpr, FETCH: tl.constexpr):
    """Producer, DYNAMIC: the k-th tile's Q (its coordinates with it) and K/V blocks (cnt loaded before).
    FETCH: between the two, the next tile's number from the global counter (its latency overlaps the K/V
    ring wait); the fetch that returns last_fetch is the launch's last and leaves the counter at zero.
    Returns the blocks loaded so far and the fetched number."""
    q_start, q_len, kv_len, q_row, q_col, kv_row, kv_col, lo, hi = tile_rows(
        m0, b, h, cu_q, cu_k, win_l, win_r, S_Q, S_K, KV_GROUP, ROW_B, ROW_H, COL_H, KV_ROW_B, KV_ROW_H, KV_COL_H,
        BM, BN, BOUND_L, BOUND_R, VARLEN)
    load_q(k, m0, b, h, q_desc, q_bufs, q_full, q_empty, tile_ids, q_row, q_col, BM // CONSUMERS, D, CONSUMERS,
           Q_BUFS, PERSISTENT, DYNAMIC)
    fetched = 0
    if FETCH:
        fetched = tl.atomic_add(tile_counter, 1, sem="relaxed")
        tl.store(tile_counter, 0, mask=fetched == last_fetch)
    load_kv(cnt, lo, hi, k_desc, v_desc, k_bufs, v_bufs, k_ends, v_ends, k_full, v_full, k_empty, kv_empty, kv_row,
            kv_col, BN, D, STAGES, RELEASE_K_EARLY)
    return cnt + hi - lo, fetched


@tlx.jit
def end_tiles(k, q_full, q_empty, tile_ids, CONSUMERS: tl.constexpr, Q_BUFS: tl.constexpr):
    """Producer, DYNAMIC: no tile is left. Each consumer's next Q buffer gets first row -1 and its
    barrier an arrival without data: the consumer reads it and stops."""
    qs, qp = tlx.warp_spec.get_bufidx_phase(k, Q_BUFS)
    for c in tl.static_range(CONSUMERS):
        slot = c + CONSUMERS * qs
        tlx.barrier_wait(q_empty[slot], qp ^ 1)
        send_tile(tile_ids, slot, -1, 0, 0)
        tlx.barrier_arrive(q_full[slot])


@tlx.jit
def send_tile(tile_ids, slot, m0, b, h):
    """DYNAMIC: a tile's (first row, batch, head) into Q buffer `slot`'s three tile_ids entries."""
    tlx.local_store(tile_ids[3 * slot], tl.full((1,), m0, tl.int32))
    tlx.local_store(tile_ids[3 * slot + 1], tl.full((1,), b, tl.int32))
    tlx.local_store(tile_ids[3 * slot + 2], tl.full((1,), h, tl.int32))


@tlx.jit
def next_tile(k, cid, q_full, tile_ids, CONSUMERS: tl.constexpr, Q_BUFS: tl.constexpr):
    """Consumer, DYNAMIC: (first row, batch, head) of its k-th tile (first row -1: none left), once the
    producer sent them."""
    qs, qp = tlx.warp_spec.get_bufidx_phase(k, Q_BUFS)
    slot = cid + CONSUMERS * qs
    tlx.barrier_wait(q_full[slot], qp)
    m0 = tl.max(tlx.local_load(tile_ids[3 * slot]), 0)
    b = tl.max(tlx.local_load(tile_ids[3 * slot + 1]), 0)
    h = tl.max(tlx.local_load(tile_ids[3 * slot + 2]), 0)
    return m0, b, h


@tlx.jit
def consume_tile(k, m0, b, h, cnt, cid, q_bufs, o_bufs, pins, k_bufs, v_bufs, k_ends, v_ends, q_full, q_empty, k_full,
                 v_full, k_empty, kv_empty, o_desc, o_ptr, lse_ptr, cu_q, cu_k, sm_scale, softcap, win_l, win_r, S_Q,
                 S_K, H, KV_GROUP, ROW_B, ROW_H, COL_H, KV_ROW_B, KV_ROW_H, KV_COL_H, O_STRIDE, OPAQUE_ZERO, trace_ptr,
                 D: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr, STAGES: tl.constexpr, PINGPONG: tl.constexpr,
                 BOUND_L: tl.constexpr, BOUND_R: tl.constexpr, SOFTCAP: tl.constexpr, SCORE_MOD: tl.constexpr,
                 MASK_MOD: tl.constexpr, VARLEN: tl.constexpr, ACTIVATION: tl.constexpr, PIPELINE: tl.constexpr,
                 PERSISTENT: tl.constexpr, Q_BUFS: tl.constexpr, CONSUMERS: tl.constexpr, O_BUFFER: tl.constexpr,
                 PIN_WAIT: tl.constexpr, P_EARLY: tl.constexpr, LAZY_RESCALE: tl.constexpr, POLY_EXP2: tl.constexpr,
                 RELEASE_K_EARLY: tl.constexpr, SKIP_BLOCKS: tl.constexpr, TRACE: tl.constexpr, LEAN_SYNC: tl.constexpr,
                 HALF_DIAGONAL: tl.constexpr, SKIP_DEAD: tl.constexpr, Q_IN_REGS: tl.constexpr, rank=0,
                 CLUSTER: tl.constexpr = 1):
    """Consumer cid's rows of its k-th tile (first row m0 of batch b, head h; cnt K/V blocks consumed
    before): wait for Q, run the K/V blocks, store the output and the LSE. Returns the tile's block count.
    (DYNAMIC: the Q wait already passed in next_tile, so it returns at once.)"""
    ROWS: tl.constexpr = BM // CONSUMERS
    dtype = tlx.dtype_of(o_desc)
    q_start, q_len, kv_len, q_row, q_col, kv_row, kv_col, lo, hi = tile_rows(
        m0, b, h, cu_q, cu_k, win_l, win_r, S_Q, S_K, KV_GROUP, ROW_B, ROW_H, COL_H, KV_ROW_B, KV_ROW_H,
        KV_COL_H, BM, BN, BOUND_L, BOUND_R, VARLEN)
    qs, qp = tlx.warp_spec.get_bufidx_phase(k, Q_BUFS)
    q_slot = cid + CONSUMERS * qs
    stamp_tile(trace_ptr, cid, k, 0, CONSUMERS, TRACE)
    tlx.barrier_wait(q_full[q_slot], qp)
    stamp_tile(trace_ptr, cid, k, 1, CONSUMERS, TRACE)
    r0 = m0 + cid * ROWS
    zero = OPAQUE_ZERO if Q_BUFS > 1 else 0                      # one Q buffer: constant slots
    pin = pins[cid] if PIN_WAIT else q_bufs[q_slot]              # (unused without PIN_WAIT)
    m_i, l_i, acc = consume_blocks(q_bufs, q_slot, zero, pin, k_bufs, v_bufs, k_ends, v_ends, k_full, v_full, k_empty,
                                   kv_empty, lo, hi, cnt, r0, b, h, kv_len, sm_scale, softcap, win_l,
                                   win_r, cid, CONSUMERS, ROWS, D, BN, STAGES, PINGPONG, BOUND_L, BOUND_R,
                                   SOFTCAP, SCORE_MOD, MASK_MOD, VARLEN, ACTIVATION, PIPELINE, PIN_WAIT,
                                   P_EARLY, LAZY_RESCALE, POLY_EXP2, RELEASE_K_EARLY, SKIP_BLOCKS, LEAN_SYNC,
                                   HALF_DIAGONAL, r0 < q_len, SKIP_DEAD, Q_IN_REGS, rank, CLUSTER)
    stamp_tile(trace_ptr, cid, k, 2, CONSUMERS, TRACE)
    if ACTIVATION == "softmax":
        out = acc * (1.0 / tl.where(l_i == 0.0, 1.0, l_i))[:, None]   # fully masked row: 0, LSE -inf
    else:
        out = acc
    if PERSISTENT and O_BUFFER:                                  # Q's last wgmma has retired (stays
        tlx.barrier_arrive(q_empty[q_slot])                      # warp-group synced: a tile may have no block)
    staging = o_bufs[cid] if O_BUFFER else q_bufs[q_slot]
    store_output(out.to(dtype), o_desc, o_ptr, staging, q_row + cid * ROWS, q_col, q_len - r0, O_STRIDE,
                 ROWS, D, VARLEN, O_BUFFER)
    if PERSISTENT and not O_BUFFER:
        tlx.barrier_arrive(q_empty[q_slot])                      # the store has read Q's buffer
    if ACTIVATION == "softmax":
        rows = r0 + tl.arange(0, ROWS)
        lse = (m_i + tl.log2(l_i)) / LOG2E
        lse_row = h * S_Q + q_start if VARLEN else (b * H + h) * S_Q   # [H, total_q] packed, else [B, H, S]
        tl.store(lse_ptr + lse_row + rows, lse, mask=rows < q_len)
    stamp_tile(trace_ptr, cid, k, 3, CONSUMERS, TRACE)
    return hi - lo


@tlx.jit
def attention_fwd_kernel(q_desc, k_desc, v_desc, o_desc, o_ptr, lse_ptr, cu_q, cu_k, sm_scale, softcap, win_l, win_r,
                         S_Q, S_K, H, KV_GROUP, ROW_B, ROW_H, COL_H, KV_ROW_B, KV_ROW_H, KV_COL_H, O_STRIDE, NUM_M,
                         NUM_TILES, OPAQUE_ZERO, trace_ptr, tile_counter, HEAD_GROUP, tile_table, D: tl.constexpr,
                         BM: tl.constexpr, BN: tl.constexpr, STAGES: tl.constexpr, PINGPONG: tl.constexpr,
                         BOUND_L: tl.constexpr, BOUND_R: tl.constexpr,
                         SOFTCAP: tl.constexpr, SCORE_MOD: tl.constexpr, MASK_MOD: tl.constexpr,
                         VARLEN: tl.constexpr, ACTIVATION: tl.constexpr, PIPELINE: tl.constexpr,
                         PERSISTENT: tl.constexpr, Q_BUFS: tl.constexpr, CONSUMERS: tl.constexpr,
                         O_BUFFER: tl.constexpr, PIN_WAIT: tl.constexpr, P_EARLY: tl.constexpr,
                         LAZY_RESCALE: tl.constexpr, POLY_EXP2: tl.constexpr, RELEASE_K_EARLY: tl.constexpr,
                         SKIP_BLOCKS: tl.constexpr, TRACE: tl.constexpr, DYNAMIC: tl.constexpr,
                         BALANCED: tl.constexpr, PREFETCH: tl.constexpr, LEAN_SYNC: tl.constexpr,
                         HALF_DIAGONAL: tl.constexpr, SKIP_DEAD: tl.constexpr, Q_IN_REGS: tl.constexpr,
                         CLUSTER: tl.constexpr = 1):
    """Tiles of BM query rows of one (batch, head): one per program, or (PERSISTENT) a program per SM
    walking its tiles; then the producer loads a tile's Q as soon as its buffer is free (q_empty: the
    consumer stored an earlier tile's output through it). Q_BUFS=2 gives each consumer two Q
    buffers, so the next tile's Q (and the producer's K/V, across the tile boundary) land while this
    tile runs instead of after its output store (short tiles waited for it at every tile).
    OPAQUE_ZERO is 0 at run time (see consume_blocks); CONSUMERS = BM // 64 consumer warp groups (a
    parameter, not derived here: the task splitter reads `replicate=` before the body's constexprs);
    O_BUFFER stages the output in its own shared buffers instead of Q's; PIN_WAIT, P_EARLY,
    RELEASE_K_EARLY see Config; SKIP_BLOCKS, SKIP_DEAD see consume_blocks. TRACE (persistent): each consumer stamps
    each tile's start, its Q landing, its K/V blocks done and its output stored (stamp_tile).
    DYNAMIC (persistent): the producer takes each next tile from the global tile_counter (zero at launch;
    the launch's last fetch resets it) in tile_in_order's order, and sends its coordinates to the consumers
    with its Q (tile_ids); static persistent programs walk tile_of's rounds instead, or (BALANCED) the tiles
    the host dealt each program in tile_table (balanced_tiles; PREFETCH: each tile's number read a tile
    ahead).
    CLUSTER=2 (launched in two-CTA clusters; plain non-causal fixed lengths, PIPELINE, static persistent
    rounds, an even number of programs and of row blocks per head: launch_args checks): tile_of's snake
    rounds then give the two CTAs of a cluster the two tiles 2v, 2v+1 of one (batch, head) in every round,
    which read the same K/V blocks. Each producer loads half of every block, multicast into both CTAs
    (load_kv_box), and every consumer releases each stage in both (release_in_cluster), so the K/V blocks
    cross from L2 to the SMs once per cluster; cluster barriers open and close every task (cluster_sync).
    Q and the output stay each CTA's own."""
    ROWS: tl.constexpr = BM // CONSUMERS
    tl.static_assert(CLUSTER == 1 or (PERSISTENT and PIPELINE and not DYNAMIC and not BALANCED and not VARLEN
                                      and not BOUND_L and not BOUND_R and MASK_MOD is None and BN != WIDE_BN
                                      and not SKIP_BLOCKS and not SKIP_DEAD),
                     "attention CLUSTER=2 runs plain non-causal fixed-length PIPELINE tiles in static rounds only")
    if VARLEN:              # (never persistent) the grid covers the longest sequence: this tile may be past its end
        first_row, seq, _ = tile_of(0, NUM_M, H, tile_table, BM, PERSISTENT, BOUND_R, BALANCED)
        seq_start, seq_len, _, _ = sequence_bounds(seq, cu_q, cu_k, S_Q, S_K, ROW_B, KV_ROW_B, VARLEN)
        if first_row >= seq_len:
            return
    dtype = tlx.dtype_of(q_desc)
    q_bufs = tlx.local_alloc((ROWS, D), dtype, CONSUMERS * Q_BUFS)   # slot c + CONSUMERS * (tile % Q_BUFS)
    o_bufs = tlx.local_alloc((ROWS, D), dtype, CONSUMERS) if O_BUFFER else q_bufs       # (else unused)
    pins = tlx.local_alloc((ROWS,), tl.float32, CONSUMERS) if PIN_WAIT else q_bufs      # written, never read
    WIDE: tl.constexpr = BN == WIDE_BN                   # a stage's first 128 keys in k_bufs, its last 64 in k_ends
    k_bufs = tlx.local_alloc((128 if WIDE else BN, D), dtype, STAGES)   # (shapes are powers of two)
    v_bufs = tlx.local_alloc((128 if WIDE else BN, D), dtype, STAGES)
    k_ends = tlx.local_alloc((WIDE_BN - 128, D), dtype, STAGES) if WIDE else k_bufs   # (else unused)
    v_ends = tlx.local_alloc((WIDE_BN - 128, D), dtype, STAGES) if WIDE else v_bufs
    q_full = tlx.alloc_barriers(CONSUMERS * Q_BUFS)
    q_empty = tlx.alloc_barriers(CONSUMERS * Q_BUFS)
    k_full = tlx.alloc_barriers(STAGES)
    v_full = tlx.alloc_barriers(STAGES)
    kv_empty = tlx.alloc_barriers(STAGES, arrive_count=CONSUMERS * CLUSTER)   # V's stage (and K's, unless
    if RELEASE_K_EARLY:                                                       # split), the cluster's consumers
        k_empty = tlx.alloc_barriers(STAGES, arrive_count=CONSUMERS * CLUSTER)
    else:
        k_empty = kv_empty
    if DYNAMIC:
        tile_ids = tlx.local_alloc((1,), tl.int32, 3 * CONSUMERS * Q_BUFS)   # the tile behind each Q buffer
    else:
        tile_ids = q_bufs                                                # (unused)
    n_tiles, my_tiles = program_tiles(NUM_TILES, tile_table, PERSISTENT, BALANCED)
    rank = cluster_rank(CLUSTER)
    with tlx.async_tasks():
        with tlx.async_task("default"):                                  # producer
            cluster_sync(CLUSTER)
            cnt = 0                                                      # K/V blocks loaded so far
            if DYNAMIC:
                n_prog = tl.num_programs(0)
                k = 0
                tail = tile_table                                        # (BALANCED: the undealt tiles)
                if BALANCED:                                             # the dealt tiles, then the tail
                    for i in range(n_tiles):
                        m0, b, h = tile_of(i, NUM_M, H, my_tiles, BM, PERSISTENT, BOUND_R, BALANCED)
                        cnt, _ = produce_tile(i, cnt, m0, b, h, 0, tile_counter, q_desc, k_desc, v_desc, q_bufs, k_bufs,
                                              v_bufs, k_ends, v_ends, q_full, q_empty, k_full, v_full, k_empty,
                                              kv_empty, tile_ids, cu_q, cu_k, win_l, win_r, S_Q, S_K, KV_GROUP, ROW_B,
                                              ROW_H, COL_H, KV_ROW_B, KV_ROW_H, KV_COL_H, D, BM, BN, STAGES, BOUND_L,
                                              BOUND_R, VARLEN, CONSUMERS, Q_BUFS, PERSISTENT, DYNAMIC, RELEASE_K_EARLY,
                                              False)
                    k = n_tiles
                    dealt = tl.load(tile_table + n_prog)
                    tail = tile_table + (n_prog + 1) + dealt
                    limit = NUM_TILES - dealt
                    off = 0                                              # tail tile t = the fetch's value
                    t = tl.atomic_add(tile_counter, 1, sem="relaxed")
                    tl.store(tile_counter, 0, mask=t == limit + n_prog - 1)   # (every program fetched its last)
                else:
                    limit = NUM_TILES
                    off = n_prog                                         # the first tiles are the program ids
                    t = tl.program_id(0)
                while t < limit:
                    if BALANCED:
                        m0, b, h = tile_of(t, NUM_M, H, tail, BM, PERSISTENT, BOUND_R, BALANCED)
                    else:
                        m0, b, h = tile_in_order(t, NUM_M, NUM_TILES // NUM_M, H, HEAD_GROUP, BM, BOUND_R)
                    cnt, fetched = produce_tile(k, cnt, m0, b, h, limit - off + n_prog - 1, tile_counter, q_desc,
                                                k_desc, v_desc, q_bufs, k_bufs, v_bufs, k_ends, v_ends, q_full, q_empty,
                                                k_full, v_full, k_empty, kv_empty, tile_ids, cu_q, cu_k, win_l, win_r,
                                                S_Q, S_K, KV_GROUP, ROW_B, ROW_H, COL_H, KV_ROW_B, KV_ROW_H, KV_COL_H,
                                                D, BM, BN, STAGES, BOUND_L, BOUND_R, VARLEN, CONSUMERS, Q_BUFS,
                                                PERSISTENT, DYNAMIC, RELEASE_K_EARLY, True)
                    t = fetched + off
                    k += 1
                end_tiles(k, q_full, q_empty, tile_ids, CONSUMERS, Q_BUFS)
            else:            # (inline, not produce_tile: the static and BALANCED defaults' SASS as timed)
                t_next = prefetch_tile(n_tiles, my_tiles, 0, PREFETCH)
                for k in range(n_tiles):
                    t_now = t_next
                    t_next = prefetch_tile(n_tiles, my_tiles, k + 1, PREFETCH)
                    m0, b, h = tile_of(k, NUM_M, H, my_tiles, BM, PERSISTENT, BOUND_R, BALANCED, t_now, PREFETCH)
                    q_start, q_len, kv_len, q_row, q_col, kv_row, kv_col, lo, hi = tile_rows(
                        m0, b, h, cu_q, cu_k, win_l, win_r, S_Q, S_K, KV_GROUP, ROW_B, ROW_H, COL_H, KV_ROW_B,
                        KV_ROW_H, KV_COL_H, BM, BN, BOUND_L, BOUND_R, VARLEN)
                    load_q(k, m0, b, h, q_desc, q_bufs, q_full, q_empty, tile_ids, q_row, q_col, ROWS, D, CONSUMERS,
                           Q_BUFS, PERSISTENT, DYNAMIC)
                    load_kv(cnt, lo, hi, k_desc, v_desc, k_bufs, v_bufs, k_ends, v_ends, k_full, v_full, k_empty,
                            kv_empty, kv_row, kv_col, BN, D, STAGES, RELEASE_K_EARLY, rank, CLUSTER)
                    cnt += hi - lo
            cluster_sync(CLUSTER)
        with tlx.async_task(num_warps=4, registers=240 if CONSUMERS == 2 else 160, replicate=CONSUMERS):
            cluster_sync(CLUSTER)
            cid = tlx.async_task_replica_id()                            # consumers (3 x 160 registers + the
            if PINGPONG:                                                 # producer's 32 fill the register file)
                if cid == CONSUMERS - 1:
                    tlx.named_barrier_arrive(8, 256)                     # consumer 0 goes first
            cnt = 0
            if DYNAMIC:      # (two loops, one call: a while loop for the static tiles changed the defaults' SASS)
                k = 0
                m0, b, h = next_tile(k, cid, q_full, tile_ids, CONSUMERS, Q_BUFS)
                while m0 >= 0:
                    cnt += consume_tile(k, m0, b, h, cnt, cid, q_bufs, o_bufs, pins, k_bufs, v_bufs, k_ends, v_ends,
                                        q_full, q_empty, k_full, v_full, k_empty, kv_empty, o_desc, o_ptr, lse_ptr,
                                        cu_q, cu_k, sm_scale, softcap, win_l, win_r, S_Q, S_K, H, KV_GROUP, ROW_B,
                                        ROW_H, COL_H, KV_ROW_B, KV_ROW_H, KV_COL_H, O_STRIDE, OPAQUE_ZERO, trace_ptr, D,
                                        BM, BN, STAGES, PINGPONG, BOUND_L, BOUND_R, SOFTCAP, SCORE_MOD, MASK_MOD,
                                        VARLEN, ACTIVATION, PIPELINE, PERSISTENT, Q_BUFS, CONSUMERS, O_BUFFER, PIN_WAIT,
                                        P_EARLY, LAZY_RESCALE, POLY_EXP2, RELEASE_K_EARLY, SKIP_BLOCKS, TRACE,
                                        LEAN_SYNC, HALF_DIAGONAL, SKIP_DEAD, Q_IN_REGS)
                    k += 1
                    m0, b, h = next_tile(k, cid, q_full, tile_ids, CONSUMERS, Q_BUFS)
            else:            # (inline, not produce_tile: the static and BALANCED defaults' SASS as timed)
                t_next = prefetch_tile(n_tiles, my_tiles, 0, PREFETCH)
                for k in range(n_tiles):
                    t_now = t_next
                    t_next = prefetch_tile(n_tiles, my_tiles, k + 1, PREFETCH)
                    m0, b, h = tile_of(k, NUM_M, H, my_tiles, BM, PERSISTENT, BOUND_R, BALANCED, t_now, PREFETCH)
                    cnt += consume_tile(k, m0, b, h, cnt, cid, q_bufs, o_bufs, pins, k_bufs, v_bufs, k_ends, v_ends,
                                        q_full, q_empty, k_full, v_full, k_empty, kv_empty, o_desc, o_ptr, lse_ptr,
                                        cu_q, cu_k, sm_scale, softcap, win_l, win_r, S_Q, S_K, H, KV_GROUP, ROW_B,
                                        ROW_H, COL_H, KV_ROW_B, KV_ROW_H, KV_COL_H, O_STRIDE, OPAQUE_ZERO, trace_ptr, D,
                                        BM, BN, STAGES, PINGPONG, BOUND_L, BOUND_R, SOFTCAP, SCORE_MOD, MASK_MOD,
                                        VARLEN, ACTIVATION, PIPELINE, PERSISTENT, Q_BUFS, CONSUMERS, O_BUFFER, PIN_WAIT,
                                        P_EARLY, LAZY_RESCALE, POLY_EXP2, RELEASE_K_EARLY, SKIP_BLOCKS, TRACE,
                                        LEAN_SYNC, HALF_DIAGONAL, SKIP_DEAD, Q_IN_REGS, rank, CLUSTER)
            if O_BUFFER:
                tlx.async_descriptor_store_wait(0)                       # the last store, before exit
            cluster_sync(CLUSTER)


@dataclass(frozen=True)
class Config:
    """BM query rows (BM // 64 consumer warp groups: 128 = two, 192 = three as in FlashAttention-3's
    head-dim-64 kernel) x BN keys per block, a STAGES-deep K/V ring. PINGPONG: the consumers take turns
    at the tensor cores. PIPELINE: FA3-style softmax/wgmma overlap inside each
    consumer (combines with PINGPONG as in FA3; STAGES=3 lets the producer run a block ahead).
    `default_config` picks per head dim from measurements."""
    BM: int = 128
    BN: int = 128
    STAGES: int = 2
    PINGPONG: bool = False
    PIPELINE: bool = False
    num_warps: int = 4
    PERSISTENT: bool = False      # one program per SM walks the tiles (fixed lengths only)
    PROGRAMS: int = 0             # persistent grid size; 0 = one per SM (tests use few, to walk many tiles)
    O_BUFFER: bool = False        # output through its own shared buffer, not Q's (the TMA store runs on)
    PIN_WAIT: bool = False        # PIPELINE: keep the P V wait after the softmax (timed: -8% to +1%, sweep-run4/5)
    P_EARLY: bool = False         # convert P to 16 bits before the V wait (a shorter exp -> P V path)
    LAZY_RESCALE: bool = False    # rescale O only when a row max ran 2^8 ahead (FA4; timed -8% to +2% against
    #                               the defaults, D=256 -1% to -5%: attention_sweep-run6-lazy)
    POLY_EXP2: bool = False       # a quarter of the softmax exps on the FMA pipes, not the MUFU (FA4; timed -1%
    #                               to -14% against the defaults at D=64/128: attention_sweep-run7-poly)
    RELEASE_K_EARLY: bool = False  # free a K stage after Q K^T, a V stage after P V (FA3's two pipelines), so a
    #                               two-stage PIPELINE loop (V j-1 and K j in use) still loads a block ahead
    SKIP_MASKED: bool = True      # a consumer skips the tile's blocks its rows cannot attend (skip_blocks), where
    #                               its range can be shorter than the tile's (skip_blocks_possible)
    DYNAMIC: bool = False         # persistent: programs take the next tile from a global counter as they finish,
    #                               longest first inside L2-sized head groups (tile_in_order), not fixed rounds;
    #                               evens the finish but tiles ran 1-5% longer, -12% to +3% against the defaults
    #                               (attention_sweep-run11/12, attention_trace-run2/3)
    HEAD_GROUP: int = 0           # DYNAMIC, BALANCED: heads per group; 0 = as many as share L2_SHARE bytes of K/V
    BALANCED: bool = False        # persistent: each program runs the tiles a host-built table deals it
    #                               (balanced_tiles: longest first to the least-loaded program, head group by
    #                               head group), not tile_of's fixed rounds: the same total work per program;
    #                               with DYNAMIC, the last TAIL of the work is left to the global counter
    TAIL: float = 0.1             # BALANCED and DYNAMIC: the share of the work (the last tiles in deal order)
    PREFETCH: bool = False        # BALANCED (static): each tile's number read from the table a tile ahead
    LEAN_SYNC: bool = False       # no warp-group bar.sync before the consumers' stage releases and in-loop K waits
    #                               (barrier_arrive's warpgroup_sync=False: only retired wgmmas read K, V and Q)
    HALF_DIAGONAL: bool = False   # causal or right window: a consumer whose rows attend only the first half of its
    #                               last block runs Q K^T and P V there over BN // 2 keys (consume_blocks)
    Q_IN_REGS: bool = False       # Q K^T reads Q from registers, loaded once per tile, not from shared memory
    #                               (consume_blocks); D=128 default (+0.35% to +2.1% in 7 of 8 cells,
    #                               -0.2% in one, on an H100); D=64's three consumers and D=256 spill with it
    SKIP_DEAD: bool = False       # a consumer whose rows all lie past the sequence end computes nothing (a 192-row
    #                               tile's last rows at S = 2^k: 3-6% of the work at 2048-4096 keys); on an H100
    #                               it lost 1-5% non-causal and won 0-2% causal (default_config)
    CLUSTER: int = 1              # 2: two-CTA clusters whose producers share each K/V block by TMA multicast (plain
    #                               non-causal fixed lengths, PIPELINE, static persistent rounds; check_cluster)

    def __post_init__(self):
        if self.BM not in (128, 192):
            raise ConfigRejected(f"attention.Config: BM must be 128 (two consumers) or 192 (three), got {self.BM}")
        if self.DYNAMIC and not self.PERSISTENT:
            raise ConfigRejected("attention.Config: DYNAMIC (tiles from a global counter) needs PERSISTENT=True")
        if self.BALANCED and not self.PERSISTENT:
            raise ConfigRejected("attention.Config: BALANCED (tiles dealt by a host table) needs PERSISTENT=True")
        if self.PREFETCH and (not self.BALANCED or self.DYNAMIC):
            raise ConfigRejected("attention.Config: PREFETCH (the table's next tile number read a tile ahead) needs "
                                 "BALANCED=True and DYNAMIC=False (DYNAMIC's consumers get their tiles with Q)")
        if self.BALANCED and self.DYNAMIC and not 0.0 < self.TAIL < 1.0:
            raise ConfigRejected(f"attention.Config: TAIL (the share of a BALANCED table's work left to DYNAMIC's "
                                 f"counter) must be in (0, 1), got {self.TAIL}")
        if self.LEAN_SYNC and (self.PIN_WAIT or self.LAZY_RESCALE):
            raise ConfigRejected("attention.Config: LEAN_SYNC cannot combine with PIN_WAIT or LAZY_RESCALE (their "
                                 "shared-memory accesses need the warp group in line before each release)")
        if self.HALF_DIAGONAL and self.BN < 128:
            raise ConfigRejected(f"attention.Config: HALF_DIAGONAL needs BN >= 128 (a half block of at least 64 keys), "
                                 f"got BN={self.BN}")
        if self.PIPELINE and self.STAGES < 2:            # blocks j-1 (V) and j (K) are in use at once
            raise ConfigRejected(f"attention.Config: PIPELINE needs STAGES >= 2, got STAGES={self.STAGES}")
        if self.BN not in (64, 128, WIDE_BN, 256):
            raise ConfigRejected(f"attention.Config: BN must be 64, 128, {WIDE_BN} or 256, got {self.BN}")
        if self.CLUSTER not in (1, 2):
            raise ConfigRejected(f"attention.Config: CLUSTER must be 1 or 2, got {self.CLUSTER}")
        if self.CLUSTER == 2 and not (self.PERSISTENT and self.PIPELINE and not self.DYNAMIC and not self.BALANCED
                                      and not self.SKIP_DEAD and self.BN != WIDE_BN):
            raise ConfigRejected(f"attention.Config: CLUSTER=2 (K/V shared by multicast) needs PERSISTENT=True and "
                                 f"PIPELINE=True without DYNAMIC, BALANCED or SKIP_DEAD (a cluster's two CTAs must "
                                 f"walk tiles of the same heads in step, every block through the pipelined loop) "
                                 f"and BN != {WIDE_BN}")
        if self.BN == WIDE_BN and not (self.PIPELINE and self.BM == 128 and not self.HALF_DIAGONAL
                                       and not self.LAZY_RESCALE and not self.POLY_EXP2):
            raise ConfigRejected(f"attention.Config: BN={WIDE_BN} (pipelined_wide_blocks) needs PIPELINE=True and "
                                 "BM=128, without HALF_DIAGONAL, LAZY_RESCALE or POLY_EXP2")


def default_config(D: int, S: int | None = None, causal: bool = False, plain: bool = True,
                   S_q: int | None = None) -> Config:
    """The fastest configuration the H200 measured (bench/results/2026-12-03/: attention-run5..8,
    attention_sweep-run2/3, and sweep runs 8/9 for RELEASE_K_EARLY; 2026-12-04 sweep runs 1/2 for BALANCED).
    `plain`: no window, softcap, mods or other activation; S None: variable lengths (never persistent);
    S_q: the queries' length where it differs from the keys' S (fixed lengths).
    - Causal plain fixed lengths run persistent with BALANCED tiles (the host's table gives every program
      the same modelled work; 2026-12-04 sweep runs 1/2 against the previous defaults, three rounds each:
      +1-4% at D=128 1024-8192 keys, +2-4% at D=256 4096 and 16384, +10-13% at D=256 8192, +3% at D=64
      8192-16384, where persistence is new; equal at D=64 1024-4096 and D=256 1024-2048). D=64 up to 4096
      keys adds DYNAMIC, which takes the table's last tenth from a global counter as programs finish
      (+4% at 1024 keys, +1-2% at 2048-4096 in sweep run 2; it lost 3-18% at D=128 from 2048 keys, D=256
      and D=64 16384, where its consumers wait for each tile's Q to learn the tile). D=128 at 16384
      causal keys stays on the grid (BALANCED -1%).
    - D=256: 64-key blocks, PIPELINE with RELEASE_K_EARLY (two stages are all that fit; freeing K after
      Q K^T lets the producer load a block ahead: 1.02-1.11x cuDNN at every length in sweep run 9 and
      0.99-1.16x in attention run 11, against 0.91-0.93x for the plain kernel; PIPELINE without it ran
      0.79-0.82x the plain kernel, sweep run 8). Non-causal adds
      PINGPONG; plain fixed non-causal lengths up to 4096 keys run persistent.
    - D=128: PIPELINE (FA3's softmax/wgmma overlap), 2-17% over the plain kernel at every length and
      2-11% with windows and softcap (run 6); plain non-causal adds PINGPONG (+0.3-4%, run 6). Plain fixed
      lengths (causal up to 4096 keys) run persistent with two stages, RELEASE_K_EARLY and O_BUFFER
      (the shared memory two stages leave holds two Q buffers and the output's): +4-9% at 1024-4096
      keys over the previous defaults, equal from 8192 (sweep run 9). Plain D=128 adds Q_IN_REGS (Q K^T
      reads Q from registers; fixed lengths, the only ones timed and checked with it on a GPU): where both
      kernels hold the card's 700 W limit, less shared-memory traffic is a higher clock. Timed on an H100
      with `bench/clock_probe.py` (two 2.5-3 s windows per kernel, in turn): +0.5 / +0.6 / +0.7 / +0.35 / +0.9% non-causal at 1024-16384 keys, +1.6 / +2.1 / -0.2% causal
      at 2048-8192, TFLOP/J up by the same (2026-12-07 clock_probe-run2..4); sweep run 11 (three rounds)
      -1.1% to +3.1% except non-causal 16384 (-7%, where that run's default read 659 TFLOPS against
      629-646 in every other run). Those runs held Q in registers in the pipelined loop only; the masked
      edge loops (the causal diagonal) read it there too since, not yet timed. Plain non-causal D=128 whose
      queries fill an even number of 128-row blocks adds CLUSTER=2 (two-CTA clusters sharing each K/V block
      by TMA multicast): +0.3 / +1.2 / +1.9 / +1.9 / +2.4% at 1024-16384 keys in one five-round H100 sweep
      (2026-12-07 attention_sweep-run13), +1.6 / +3.3% at 4096 / 16384 (run 12, three rounds) and +1.8 / +3.6
      / +0.1% at 4096-16384 (run 14, five rounds); never slower. Not yet timed on an H200.
    - D=64 non-causal from 2048 keys (plain, fixed lengths): FA3's 192 x 128 tile, three consumers taking
      turns, PIPELINE, persistent with two stages and RELEASE_K_EARLY (1.11-1.15x cuDNN, +4-7% over the
      grid kernel, sweep run 9). Causal from 8192 keys: the same tile with three stages (1.06-1.12x on a
      grid; the fixed rounds of persistent causal three-consumer tiles ran 7-50% slower).
    - Shorter D=64: persistent for plain fixed lengths (non-causal 1.00-1.09x cuDNN, causal 0.90-1.03x),
      with 256-key blocks when S is a multiple of 256 (+4-8%), except causal below 4096 keys (a 256-key
      diagonal block wastes more than longer blocks gain) and with windows, softcap or user mods
      (`plain` False: their masked or transformed 256-wide tiles ran 10-35% slower). Non-causal 256-key
      tiles add O_BUFFER (+1-6% at 1024-2048 keys), causal ones P_EARLY (+1-3%; sweep-run4/5).
    - D=64 causal (plain, fixed lengths) adds HALF_DIAGONAL: +0.4% to +4.9% at every length from 1024 to
      16384 keys in two H100 sweeps (2026-12-06 attention_sweep-run4/5, three rounds each). At D=128 the
      same option won 2-4% at 1024 keys but lost 4-8% at 2048-4096 (runs 4/5), and with consumer 1's
      half-block code pruned still -3.8% at 2048 (run 6): it stays off there.
    - D=64 causal at 2048-4096 keys: the three-consumer tile of 8192 keys on (persistent, BALANCED,
      HALF_DIAGONAL): +3.5% / +2.8% (2048 / 4096 keys, attention_sweep-run7) and +2.6% / +2.9% (run 8) over
      the 128-row default on an H100, three rounds each; at 1024 keys it lost 12% (run 7).
    - D=64 causal below 2048 keys (the 128-row tile) adds O_BUFFER: its output store then runs on under the
      next tile instead of waiting in Q's buffer; +1.2% and +2.0% at 1024 keys, to parity with cuDNN
      (H100, 2026-12-07 attention_sweep-run3/4, three rounds each).
    - D=64 causal at 2048-4096 keys adds SKIP_DEAD (the 192-row tile's consumers past the sequence end, 6% of
      the work there, compute nothing): +2.2% at 2048 and +0.7% at 4096 in two builds each (H100, 2026-12-07
      attention_sweep-run7, three rounds), +1.7% at both in run 8 (five rounds); from 8192 keys (under 2% of
      the work) -0.3% to +0.9% in run 7 and +0.2% / -3.0% (8192 / 16384) in run 9, and non-causal 192-row
      tiles lost 1-5% with it, so it stays off there."""
    fixed = S is not None                                  # persistence needs fixed lengths
    balanced = plain and fixed and causal
    if D > 128:
        persistent = plain and fixed and (causal or S <= 4096)
        return Config(BN=64, PIPELINE=True, RELEASE_K_EARLY=True, PINGPONG=plain and not causal,
                      PERSISTENT=persistent, BALANCED=balanced)
    if D == 128:
        if plain and fixed and (not causal or S <= 4096):
            pairs = not causal and (S_q or S) % 256 == 0       # an even number of 128-row tiles per head
            return Config(STAGES=2, PIPELINE=True, PERSISTENT=True, O_BUFFER=True, RELEASE_K_EARLY=True,
                          BALANCED=balanced, Q_IN_REGS=True, CLUSTER=2 if pairs else 1)
        balanced = balanced and S <= 8192
        return Config(STAGES=3, PIPELINE=True, PINGPONG=plain and not causal, PERSISTENT=balanced, BALANCED=balanced,
                      Q_IN_REGS=plain and fixed)
    if plain and fixed and not causal and S >= 2048:
        return Config(BM=192, STAGES=2, PIPELINE=True, PINGPONG=True, PERSISTENT=True, RELEASE_K_EARLY=True)
    if plain and fixed and (S >= 8192 or (causal and S >= 2048)):
        return Config(BM=192, STAGES=3, PIPELINE=True, PINGPONG=True, PERSISTENT=balanced, BALANCED=balanced,
                      HALF_DIAGONAL=balanced, SKIP_DEAD=causal and S <= 4096)
    wide = plain and fixed and S % 256 == 0 and (not causal or S >= 4096)
    return Config(BN=256 if wide else 128, PERSISTENT=plain and fixed, O_BUFFER=(wide and not causal) or balanced,
                  P_EARLY=plain and fixed and causal, BALANCED=balanced, DYNAMIC=balanced, HALF_DIAGONAL=balanced)


def skip_blocks_possible(cfg: Config, left: int | None, right: int | None, mask_mod) -> bool:
    """Whether a consumer's block range can be shorter than its tile's (consumer_range): a left window
    edge moves with the consumer's first row; causal (right = 0) cuts the first consumers' last block
    only when BN is not a multiple of BM (64-key blocks, 192-row tiles); a right window can cut
    any. A user mask_mod can keep any pair, so never."""
    if mask_mod is not None:
        return False
    return left is not None or (right is not None and (right > 0 or cfg.BN % cfg.BM != 0))


def block_multiple(D: int, S: int, cfg: Config | None = None) -> int:
    """What a fixed length must be a multiple of for `cfg`'s blocks (None: the default's): one consumer's rows
    and BN (a multiple of 64; a WIDE_BN block's last 64 or 128 keys run as a narrower block, so 64 there)."""
    cfg = cfg or default_config(D, S)
    return max(CONSUMER_ROWS, 64 if cfg.BN == WIDE_BN else cfg.BN)


def q_buffers(cfg: Config, D: int, itemsize: int) -> int:
    """Q buffers per consumer: two when persistent and beside the K/V ring (and the output buffers of
    O_BUFFER) in shared memory (the next tile's Q then loads during this one: D=64 non-causal S=1024
    ran 1.03x cuDNN with two, 0.94x with one, attention-run6/7), else one. Masked tiles (causal,
    windows) take two since the edge loops index Q through the kernel's opaque zero (consume_blocks)."""
    return 2 if cfg.PERSISTENT and shared_bytes(cfg, D, itemsize, 2) <= SHARED_LIMIT else 1


def shared_bytes(cfg: Config, D: int, itemsize: int, q_bufs: int) -> int:
    """Shared memory of the K/V ring, `q_bufs` Q buffers per consumer and O_BUFFER's output buffers."""
    kv = 2 * cfg.STAGES * cfg.BN * D * itemsize
    q = cfg.BM * D * itemsize                      # one buffer per consumer, ROWS rows each
    o = q if cfg.O_BUFFER else 0
    return kv + q_bufs * q + o


LAYOUTS = ("bhsd", "bshd", "thd")
ACTIVATIONS = ("softmax", "gelu", "silu")


def _error(msg: str) -> ValueError:
    return ValueError(f"tlx.attention: {msg}")


@dataclass(frozen=True)
class Features:
    """What a call computes beyond plain softmax attention; checked on construction.
    window: (left, right), query i attends keys i-left <= j <= i+right, None = unbounded on that side.
    Causal is the window's right side at 0 (top-left aligned, also for variable lengths)."""
    causal: bool = False
    window: tuple | None = None
    softcap: float | None = None
    score_mod: object = None
    mask_mod: object = None
    activation: str = "softmax"

    def __post_init__(self):
        w = self.window
        if w is not None and (not isinstance(w, (tuple, list)) or len(w) != 2 or not all(
                x is None or (isinstance(x, int) and not isinstance(x, bool) and x >= 0) for x in w)):
            raise _error(f"'window' must be None or (left, right) with each side a non-negative int or None, got {w!r}")
        if self.softcap is not None and (isinstance(self.softcap, bool) or not isinstance(self.softcap, (int, float))
                                         or not self.softcap > 0):
            raise _error(f"'softcap' must be None or a positive number, got {self.softcap!r}")
        for name in ("score_mod", "mask_mod"):
            fn = getattr(self, name)
            if fn is not None and not isinstance(fn, tlx.TlxKernel):
                raise _error(f"'{name}' must be a @tlx.jit function, got {type(fn).__name__}")
        if self.activation not in ACTIVATIONS:
            raise _error(f"'activation' must be one of {ACTIVATIONS}, got {self.activation!r}")

    def plain(self) -> bool:
        """Softmax attention with no window, softcap or user mods (causal or not)."""
        return self.window is None and self.softcap is None and self.score_mod is None and self.mask_mod is None \
            and self.activation == "softmax"

    def bounds(self) -> tuple[int | None, int | None]:
        """(left, right) window bounds with causal folded in (None: unbounded)."""
        left, right = self.window if self.window is not None else (None, None)
        if self.causal:
            right = 0
        return left, right


@dataclass(frozen=True)
class Shape:
    """Sizes of one call. Fixed lengths: S_q = S_k = S. "thd": S_q, S_k are the packed row counts."""
    B: int
    H: int
    H_kv: int
    S_q: int
    S_k: int
    D: int
    varlen: bool


def _check_tensors(q, k, v, layout: str) -> None:
    dims = 3 if layout == "thd" else 4
    for name, t in (("q", q), ("k", k), ("v", v)):
        if t.dim() != dims:
            raise _error(f"'{name}' must be {dims}-D [{layout.upper()}] for layout {layout!r}, got shape "
                         f"{tuple(t.shape)}")
        if t.dtype != q.dtype or str(t.dtype) not in ("torch.float16", "torch.bfloat16"):
            raise _error(f"q, k, v must all be float16 or bfloat16, got {q.dtype}, {k.dtype}, {v.dtype}")
        if t.device != q.device:
            raise _error(f"q, k, v must be on one device, got {q.device}, {k.device}, {v.device}")
        if not t.is_contiguous():
            raise _error(f"'{name}' must be contiguous in layout {layout!r}")
    if k.shape != v.shape or k.shape[-1] != q.shape[-1] or (dims == 4 and k.shape[0] != q.shape[0]):
        raise _error(f"k and v must have shape [{'T' if dims == 3 else 'B'}, ..., D] matching q, got "
                     f"{tuple(k.shape)} and {tuple(v.shape)} for q {tuple(q.shape)}")


def _check_cu_seqlens(q, cu_q, cu_k, layout: str) -> None:
    if layout != "thd":
        if cu_q is not None or cu_k is not None:
            raise _error(f"'cu_seqlens_q' / 'cu_seqlens_k' need layout='thd' (packed [total, H, D]), got "
                         f"layout {layout!r}")
        return
    for name, cu in (("cu_seqlens_q", cu_q), ("cu_seqlens_k", cu_k)):
        if cu is None:
            raise _error(f"'{name}' must be given for layout 'thd', got None")
        if cu.dim() != 1 or cu.shape[0] < 2 or str(cu.dtype) != "torch.int32" or cu.device != q.device:
            raise _error(f"'{name}' must be a 1-D int32 tensor of B+1 >= 2 prefix sums on {q.device}, got shape "
                         f"{tuple(cu.shape)} {cu.dtype} on {cu.device}")
        if cu.stride(0) != 1:                                      # the kernel reads entry b at cu + b
            raise _error(f"'{name}' must be contiguous, got stride {cu.stride(0)}; pass {name}.contiguous()")
    if cu_q.shape != cu_k.shape:
        raise _error(f"'cu_seqlens_q' and 'cu_seqlens_k' must both hold B+1 entries, got {cu_q.shape[0]} and "
                     f"{cu_k.shape[0]}")


def check_inputs(q, k, v, layout: str, cu_seqlens_q=None, cu_seqlens_k=None, config=None) -> Shape:
    """Sizes of a call, after checking everything the kernel assumes that needs no tensor data. With an
    explicit `config`, "bhsd" lengths are left to launch_args, which checks them against that config's
    blocks (BN=192 runs multiples of 64 that the default's 128-key blocks would refuse)."""
    if layout not in LAYOUTS:
        raise _error(f"'layout' must be one of {LAYOUTS}, got {layout!r}")
    _check_tensors(q, k, v, layout)
    _check_cu_seqlens(q, cu_seqlens_q, cu_seqlens_k, layout)
    if layout == "thd":
        (S, H, D), (Sk, Hk) = q.shape, k.shape[:2]
        B = cu_seqlens_q.shape[0] - 1
    elif layout == "bhsd":
        (B, H, S, D), (Hk, Sk) = q.shape, k.shape[1:3]
    else:
        (B, S, H, D), (Sk, Hk) = q.shape, k.shape[1:3]
    if D not in (64, 128, 256):
        raise _error(f"head dim must be 64, 128 or 256, got {D}")
    if (Hk == 0 and H) or (Hk and H % Hk):           # no heads at all is an empty problem (attention)
        raise _error(f"query heads ({H}) must be a multiple of key/value heads ({Hk}) for GQA/MQA")
    if layout == "bhsd":              # "bshd" of any lengths runs as packed sequences (_bshd_as_packed)
        if Sk != S:
            raise _error(f"key length {Sk} must equal query length {S} (use layout='bshd' or 'thd' for other "
                         "lengths)")
        multiple = block_multiple(D, S)
        if config is None and S % multiple:
            raise _error(f"sequence length must be a multiple of {multiple}, got {S} (use "
                         "layout='bshd' or 'thd' for other lengths)")
    return Shape(B, H, Hk, S, Sk, D, layout == "thd")


def check_scale(scale, activation: str = "softmax") -> None:
    if scale is not None and (isinstance(scale, bool) or not isinstance(scale, (int, float))):
        raise _error(f"'scale' must be None or a number, got {scale!r}")
    if scale is not None and activation == "softmax" and not scale >= 0:   # the kernel takes row maxima of
        raise _error(f"'scale' must be >= 0 for softmax attention, got {scale!r}")   # unscaled scores


def check_seqlens(cu_seqlens_q, cu_seqlens_k, shape: Shape) -> int:
    """The longest query sequence, after checking the prefix sums' values (reads them: one device sync)."""
    longest = 0
    for name, cu, total in (("cu_seqlens_q", cu_seqlens_q, shape.S_q), ("cu_seqlens_k", cu_seqlens_k, shape.S_k)):
        vals = cu.tolist()
        lengths = [b - a for a, b in zip(vals, vals[1:])]
        if vals[0] != 0 or min(lengths) < 0 or vals[-1] != total:
            raise _error(f"'{name}' must rise monotonically from 0 to the packed length {total}, got {vals}")
        if name == "cu_seqlens_q":
            longest = max(lengths)
    return longest


def _views(q, k, v, o, shape: Shape, layout: str):
    """2-D row-major views of q, k, v, o and the row/column strides the kernel addresses them with:
    (ROW_B, ROW_H, COL_H, KV_ROW_B, KV_ROW_H, KV_COL_H, O_STRIDE)."""
    H, Hk, S, D = shape.H, shape.H_kv, shape.S_q, shape.D
    if layout == "bhsd":
        return [t.reshape(-1, D) for t in (q, k, v, o)], (H * S, S, 0, Hk * S, S, 0, D)
    views = [q.reshape(-1, H * D), k.reshape(-1, Hk * D), v.reshape(-1, Hk * D), o.reshape(-1, H * D)]
    rows_per_batch = 0 if layout == "thd" else S            # "thd": rows start at cu_seqlens
    return views, (rows_per_batch, 0, D, rows_per_batch, 0, D, H * D)


L2_SHARE = 16 << 20     # DYNAMIC, BALANCED: bytes of K/V a head group may keep in L2 (a third of the H200's 50 MB)


def head_group(shape: Shape, D: int, itemsize: int) -> int:
    """DYNAMIC, BALANCED: heads per group (tile_in_order, balanced_tiles), as many as share L2_SHARE bytes of
    K/V (GQA heads share theirs)."""
    kv_bytes = 2 * shape.S_k * D * itemsize * shape.H_kv // shape.H
    return max(1, min(shape.B * shape.H, L2_SHARE // max(kv_bytes, 1)))


TILE_OVERHEAD = 1.2     # BALANCED: a tile's own cost (Q wait, output store, the gap to the next) in 128 x 64 K/V
#                         blocks' work, from 2026-12-03's attention_trace-run1..3 (D=64 causal: 1.4 us a tile
#                         + 1.18 us a block)


def tile_cost(m0: int, S_k: int, left: int | None, right: int | None, cfg: Config, D: int,
              S_q: int | None = None) -> float:
    """BALANCED's cost model of the tile whose first query row is m0 (fixed lengths): its K/V blocks (the
    range kv_block_range computes) plus TILE_OVERHEAD, in units of a 128-key, 64-wide block. `S_q`
    (SKIP_DEAD): the blocks count only for the share of the tile's rows before the end, as if the live
    consumers took the tensor cores' time the skipping ones leave (a model, not yet timed)."""
    lo = max(m0 - left, 0) // cfg.BN if left is not None else 0
    hi = min(m0 + cfg.BM + right, S_k) if right is not None else S_k
    blocks = max(triton.cdiv(hi, cfg.BN), lo) - lo
    live = min(S_q - m0, cfg.BM) / cfg.BM if S_q is not None else 1.0     # (tiles start before S_q)
    return TILE_OVERHEAD + blocks * cfg.BN * D / (128 * 64) * live


def balanced_tiles(costs: list[float], heads: int, programs: int, group: int, tail: float = 0.0) -> list[int]:
    """BALANCED's table: the tiles t = head * len(costs) + m (costs[m]: tile m's cost in every head) dealt to
    `programs`, head group by head group (`group` heads, as DYNAMIC's tile_in_order), so the programs work
    through one group's K/V at a time. Inside a group, longest first, each tile to the program with the
    least total so far (list scheduling, as DYNAMIC does at run time but without its atomic); then
    balance_swaps evens what a group of fewer tiles than programs leaves. `tail` (with DYNAMIC): the last
    tiles of that order, up to this share of the work, are not dealt but left to the counter. Returns
    programs + 1 offsets (the last: the dealt tiles' count), each program's tiles in run_order, then the
    tail's tiles longest first."""
    import heapq
    num_m = len(costs)
    by_length = sorted(range(num_m), key=lambda m: -costs[m])
    order = [(bh, m) for first in range(0, heads, group) for m in by_length
             for bh in range(first, min(first + group, heads))]
    left = tail * sum(costs) * heads
    cut = len(order)
    while cut > programs and costs[order[cut - 1][1]] <= left:     # every program keeps a dealt tile
        cut -= 1
        left -= costs[order[cut][1]]
    loads = [(0.0, p) for p in range(programs)]
    dealt: list[list[tuple[int, int]]] = [[] for _ in range(programs)]      # (head, m) per program
    for bh, m in order[:cut]:
        load, p = heapq.heappop(loads)
        dealt[p].append((bh, m))
        heapq.heappush(loads, (load + costs[m], p))
    balance_swaps(dealt, costs, group)
    offsets, table = [0], []
    for tiles in dealt:
        table += [bh * num_m + m for bh, m in run_order(tiles, costs, group)]
        offsets.append(len(table))
    return offsets + table + [bh * num_m + m for bh, m in order[cut:]]


def run_order(tiles: list[tuple[int, int]], costs: list[float], group: int) -> list[tuple[int, int]]:
    """A program's (head, m) tiles in the order it runs them: head group by head group, inside a group
    longest, shortest, second longest, ... (a run of one-block tiles leaves too little work in flight to
    hide each tile's Q load and output store; balanced_tiles's first tables ran every group's short tiles
    last: D=64 causal 1024 keys, 2% more time per program, attention_trace-run1 of 2026-12-04)."""
    out = []
    for g in sorted({bh // group for bh, _ in tiles}):
        mine = sorted((t for t in tiles if t[0] // group == g), key=lambda t: (-costs[t[1]], t[0]))
        out += [mine[i // 2] if i % 2 == 0 else mine[-1 - i // 2] for i in range(len(mine))]
    return out


def balance_swaps(dealt: list[list[tuple[int, int]]], costs: list[float], group: int, rounds: int = 10000) -> None:
    """Evens the programs' totals in place: while it lowers the largest, swap a tile of the most loaded
    program for a shorter one of the same head group in the least loaded (or move it there), the pair whose
    difference comes nearest half the gap."""
    loads = [sum(costs[m] for _, m in tiles) for tiles in dealt]
    for _ in range(rounds):
        hi = max(range(len(loads)), key=loads.__getitem__)
        lo = min(range(len(loads)), key=loads.__getitem__)
        gap = loads[hi] - loads[lo]
        best = None                                        # (distance from gap / 2, index in hi, index in lo)
        for i, (bh, m) in enumerate(dealt[hi]):
            for j, (bh2, m2) in [(-1, (bh, None))] + list(enumerate(dealt[lo])):
                if bh2 // group != bh // group:
                    continue
                delta = costs[m] - (0.0 if m2 is None else costs[m2])
                if 1e-9 < delta < gap - 1e-9 and (best is None or abs(delta - gap / 2) < best[0]):
                    best = (abs(delta - gap / 2), i, j)
        if best is None:
            return
        _, i, j = best
        tile = dealt[hi].pop(i)
        other = dealt[lo].pop(j) if j >= 0 else None
        dealt[lo].append(tile)
        loads[hi] -= costs[tile[1]]
        loads[lo] += costs[tile[1]]
        if other is not None:
            dealt[hi].append(other)
            loads[hi] += costs[other[1]]
            loads[lo] -= costs[other[1]]


def tile_table(device, shape: Shape, cfg: Config, left: int | None, right: int | None, programs: int, group: int):
    """BALANCED: the int32 table of balanced_tiles on `device` (with DYNAMIC, a TAIL of it undealt). The last
    few problems' tables are kept (_tile_table), so a launch cache miss does not deal again; a cached launch
    holds its own (attention())."""
    return _tile_table(str(device), triton.cdiv(shape.S_q, cfg.BM), shape.B * shape.H, shape.S_k, shape.D, cfg.BM,
                       cfg.BN, left, right, programs, group, cfg.TAIL if cfg.DYNAMIC else 0.0,
                       shape.S_q if cfg.SKIP_DEAD else None)


@functools.lru_cache(maxsize=16)
def _tile_table(device: str, num_m: int, heads: int, S_k: int, D: int, BM: int, BN: int, left, right, programs: int,
                group: int, tail: float, S_q: int | None = None):
    import torch
    cfg = Config(BM=BM, BN=BN)
    costs = [tile_cost(m * BM, S_k, left, right, cfg, D, S_q) for m in range(num_m)]
    return torch.tensor(balanced_tiles(costs, heads, programs, group, tail), dtype=torch.int32, device=device)


def tile_counter(device):
    """DYNAMIC: a fresh int32 tile counter for one prepared launch. It is zero between that launch's runs (each
    run's last fetch resets it), and no two runs in flight share it: the op's launch cache keys the stream,
    and CUDA graphs that capture different calls hold different counters (one counter per stream would race
    between two graphs captured on torch's shared capture stream and replayed on two streams)."""
    import torch
    return torch.zeros(1, dtype=torch.int32, device=device)


def check_wide(shape: Shape, features: Features) -> None:
    """What BN=WIDE_BN (pipelined_wide_blocks) runs: plain non-causal softmax at fixed lengths whose keys are
    a multiple of 64 (the last block's 64 or 128 keys run as a narrower block), head dim 64 or 128."""
    if not features.plain() or features.causal or shape.varlen or shape.D > 128:
        raise ConfigRejected(f"attention.Config: BN={WIDE_BN} runs plain non-causal softmax attention at fixed "
                             f"lengths and head dim 64 or 128 only, got D={shape.D}, variable lengths={shape.varlen}, "
                             f"{features}")
    if shape.S_q % CONSUMER_ROWS or shape.S_k % 64:
        raise ConfigRejected(f"attention.Config: BN={WIDE_BN} needs lengths that are multiples of 64, got "
                             f"{shape.S_q}/{shape.S_k}")


def check_shared(cfg: Config, D: int, itemsize: int) -> None:
    """The K/V ring, Q and the output buffer inside one block's shared memory (refused here, by name, rather
    than by the compiler's allocation error)."""
    used = shared_bytes(cfg, D, itemsize, q_buffers(cfg, D, itemsize))
    if used > SHARED_LIMIT:
        raise ConfigRejected(f"attention.Config: BN={cfg.BN} with STAGES={cfg.STAGES}, O_BUFFER={cfg.O_BUFFER} needs "
                             f"{used} bytes of shared memory at head dim {D}, over the {SHARED_LIMIT} available "
                             "(fewer STAGES or a smaller BN)")


def check_cluster(cfg: Config, shape: Shape, features: Features, num_m: int, programs: int) -> None:
    """What CLUSTER=2 runs: tile_of's snake rounds give a cluster's two CTAs (programs 2u, 2u+1) the tiles
    2v, 2v+1 of one head in every round when both the programs and the row blocks per head are even; the
    two tiles then read the same K/V blocks only when no mask or variable length makes their ranges differ
    (and the pipelined loop, the only one that releases in both CTAs, covers every block)."""
    if not features.plain() or features.causal or shape.varlen:
        raise ConfigRejected(f"attention.Config: CLUSTER=2 runs plain non-causal softmax attention at fixed "
                             f"lengths only (both CTAs of a cluster read the same K/V blocks), got variable "
                             f"lengths={shape.varlen}, {features}")
    if num_m % 2:
        raise ConfigRejected(f"attention.Config: CLUSTER=2 needs an even number of {cfg.BM}-row blocks per head (a "
                             f"cluster takes two of one head), got {num_m} for {shape.S_q} queries")
    if programs % 2:
        raise ConfigRejected(f"attention.Config: CLUSTER=2 launches whole two-CTA clusters: PROGRAMS must be even, "
                             f"got {programs}")


def resolve_config(shape: Shape, features: Features, cfg: Config | None) -> Config:
    """`cfg`, or (None) the default_config of the call's head dim, length and features."""
    return cfg or default_config(shape.D, None if shape.varlen else shape.S_k, features.causal, features.plain(),
                                 shape.S_q)


def launch_args(q, k, v, o, lse, scale: float, layout: str, cfg: Config | None = None,
                features: Features = Features(), cu_seqlens_q=None, cu_seqlens_k=None, max_seqlen_q: int = 0,
                trace=None):
    """Kernel arguments, grid and constexprs of one launch (the simulator and the GPU share them).
    Unused pointers (LSE without softmax, cu_seqlens with fixed lengths, the trace) get `o`: never read.
    `trace` (persistent configs): an int64 tensor of programs x consumers x TRACE_TILES x TRACE_STAMPS
    that the consumers stamp (stamp_tile; bench/attention_trace.py)."""
    shape = check_inputs(q, k, v, layout, cu_seqlens_q, cu_seqlens_k, cfg)
    if layout == "bshd" and _ragged(shape.S_q, shape.S_k, shape.D, cfg):
        raise _error(f"launch_args: 'bshd' lengths {shape.S_q}/{shape.S_k} are not block multiples: call "
                     "attention(), which runs them as packed sequences")
    cfg = resolve_config(shape, features, cfg)
    (q2, k2, v2, o2), strides = _views(q, k, v, o, shape, layout)
    D = shape.D
    if cfg.BM == 192 and D > 64:
        raise ConfigRejected(f"attention.Config: BM=192 (three consumers at 160 registers each) needs head dim 64, "
                             f"got {D}")
    if cfg.Q_IN_REGS and (D > 128 or cfg.BM == 192):
        raise ConfigRejected(f"attention.Config: Q_IN_REGS (Q held in registers for Q K^T) spills at head dim {D} with "
                             f"BM={cfg.BM}; it is for two-consumer tiles up to head dim 128")
    if cfg.BN == WIDE_BN:
        check_wide(shape, features)
    elif not shape.varlen and (shape.S_q % CONSUMER_ROWS or shape.S_k % cfg.BN):
        raise ConfigRejected(f"attention.Config: fixed lengths must be multiples of {CONSUMER_ROWS} (queries) and "
                             f"BN={cfg.BN} (keys), got {shape.S_q}/{shape.S_k}")
    check_shared(cfg, D, q.element_size())
    pipeline = cfg.PIPELINE and features.activation == "softmax"    # the overlap is the softmax's
    box = [CONSUMER_ROWS, D]                               # Q and O move one consumer's rows per TMA box
    kv_rows = kv_box(cfg.BN, cfg.CLUSTER)
    descs = [tlx.TensorDescriptor.from_tensor(q2, box), tlx.TensorDescriptor.from_tensor(k2, [kv_rows, D]),
             tlx.TensorDescriptor.from_tensor(v2, [kv_rows, D]), tlx.TensorDescriptor.from_tensor(o2, box)]
    left, right = features.bounds()
    cu_q, cu_k = (cu_seqlens_q, cu_seqlens_k) if shape.varlen else (o, o)
    if cfg.PERSISTENT and shape.varlen:
        raise ConfigRejected("attention.Config: 'PERSISTENT' needs fixed lengths (layout 'bhsd' or 'bshd' of "
                             "block-multiple lengths), got variable lengths")
    rows = max_seqlen_q if shape.varlen else shape.S_q
    num_m = triton.cdiv(rows, cfg.BM)
    num_tiles = num_m * shape.B * shape.H
    programs = min(num_tiles, cfg.PROGRAMS or num_sms(q.device))
    if cfg.CLUSTER > 1:
        if not cfg.PROGRAMS:
            programs -= programs % cfg.CLUSTER              # whole clusters (an odd SM count leaves one out)
        check_cluster(cfg, shape, features, num_m, programs)
    if trace is not None:
        if not cfg.PERSISTENT:
            raise ConfigRejected("attention.launch_args: 'trace' needs a persistent config (PERSISTENT=True)")
        need = programs * (cfg.BM // CONSUMER_ROWS) * TRACE_TILES * TRACE_STAMPS
        if str(trace.dtype) != "torch.int64" or trace.numel() < need:
            raise ValueError(f"attention.launch_args: 'trace' must be int64 with {need} elements (programs x "
                             f"consumers x {TRACE_TILES} x {TRACE_STAMPS}), got {trace.dtype} with {trace.numel()}")
    group = cfg.HEAD_GROUP or head_group(shape, D, q.element_size())
    args = (*descs, o, lse if lse is not None else o, cu_q, cu_k, float(scale), float(features.softcap or 1.0),
            left or 0, right or 0, shape.S_q, shape.S_k, shape.H, shape.H // shape.H_kv, *strides, num_m, num_tiles,
            0,                                                  # OPAQUE_ZERO: a zero no compiler can see
            o if trace is None else trace,
            tile_counter(q.device) if cfg.DYNAMIC else o,
            group,
            tile_table(q.device, shape, cfg, left, right, programs, group) if cfg.BALANCED else o)
    if cfg.PERSISTENT:
        grid = (programs,)
    else:
        grid = (num_m, shape.B * shape.H)
    meta = dict(D=D, BM=cfg.BM, BN=cfg.BN, STAGES=cfg.STAGES, PINGPONG=cfg.PINGPONG, BOUND_L=left is not None,
                BOUND_R=right is not None, SOFTCAP=features.softcap is not None,
                SCORE_MOD=features.score_mod, MASK_MOD=features.mask_mod, VARLEN=shape.varlen,
                ACTIVATION=features.activation, PIPELINE=pipeline,
                PERSISTENT=cfg.PERSISTENT, CONSUMERS=cfg.BM // CONSUMER_ROWS,
                Q_BUFS=q_buffers(cfg, D, q.element_size()), O_BUFFER=cfg.O_BUFFER,
                PIN_WAIT=cfg.PIN_WAIT and pipeline, P_EARLY=cfg.P_EARLY,
                LAZY_RESCALE=cfg.LAZY_RESCALE, POLY_EXP2=cfg.POLY_EXP2, RELEASE_K_EARLY=cfg.RELEASE_K_EARLY,
                SKIP_BLOCKS=cfg.SKIP_MASKED and skip_blocks_possible(cfg, left, right, features.mask_mod),
                TRACE=trace is not None, DYNAMIC=cfg.DYNAMIC, BALANCED=cfg.BALANCED, PREFETCH=cfg.PREFETCH,
                LEAN_SYNC=cfg.LEAN_SYNC, HALF_DIAGONAL=cfg.HALF_DIAGONAL and right is not None,
                SKIP_DEAD=cfg.SKIP_DEAD and (shape.varlen or shape.S_q % cfg.BM != 0),
                Q_IN_REGS=cfg.Q_IN_REGS)
    if cfg.CLUSTER > 1:
        meta.update(CLUSTER=cfg.CLUSTER, ctas_per_cga=(cfg.CLUSTER, 1, 1))
    return args, grid, meta, cfg


def attention(q, k, v, causal: bool = False, scale: float | None = None, layout: str = "bhsd",
              backend: str | None = None, return_lse: bool = False, config: Config | None = None, *,
              window=None, softcap: float | None = None, score_mod=None, mask_mod=None, cu_seqlens_q=None,
              cu_seqlens_k=None, activation: str = "softmax", out=None, sim_options=None):
    """act(q k^T * scale [+ masks]) v. softmax (default) normalizes and can return the LSE; "gelu"/"silu"
    do not. q [B, H, S, D] (layout "bshd": [B, S, H, D]; "thd": packed [total, H, D] with cu_seqlens).
    LSE: [B, H, S] (natural log), [H, total_q] for "thd"; -inf for a row that attends nothing (its
    output row is 0). `out`: an optional output tensor shaped like q (q itself runs in place; one
    overlapping k or v is refused). `sim_options`: for backend="sim"."""
    import torch
    if layout == "bshd" and cu_seqlens_q is None and q.dim() == 4 and k.dim() == 4 and q.shape[0] and \
            _ragged(q.shape[1], k.shape[1], q.shape[-1], config):
        return _bshd_as_packed(q, k, v, causal, scale, backend, return_lse, config, out, sim_options,
                               window=window, softcap=softcap, score_mod=score_mod, mask_mod=mask_mod,
                               activation=activation)
    if causal not in (True, False):                       # a string such as "no" would read as True
        raise _error(f"'causal' must be True or False, got {causal!r}")
    if config is not None and not isinstance(config, Config):
        raise _error(f"'config' must be None or an attention.Config, got {config!r}")
    features = Features(bool(causal), window, softcap, score_mod, mask_mod, activation)
    if return_lse and activation != "softmax":
        raise _error(f"'return_lse' needs activation='softmax' (no normalization otherwise), got {activation!r}")
    check_scale(scale, activation)
    shape = check_inputs(q, k, v, layout, cu_seqlens_q, cu_seqlens_k, config)
    if out is not None and (out.shape != q.shape or out.dtype != q.dtype or out.device != q.device
                            or not out.is_contiguous()):
        raise _error(f"'out' must be a contiguous {q.dtype} tensor of shape {tuple(q.shape)} on {q.device}, got "
                     f"{out.dtype} {tuple(out.shape)} on {out.device}")
    if out is not None:
        # out may be q itself (same shape and contiguity, checked above): each tile reads its Q rows before it
        # stores those same rows; K and V are read by every tile
        in_place = out.data_ptr() == q.data_ptr()
        name = overlapping_input(out, {"k": k, "v": v} if in_place else {"q": q, "k": k, "v": v})
        if name:
            raise _error(f"'out' must not share memory with '{name}' (tiles still reading it would see outputs "
                         "already stored); pass a separate output, or q itself")
    longest = check_seqlens(cu_seqlens_q, cu_seqlens_k, shape) if shape.varlen else 0
    scale = 1.0 / math.sqrt(shape.D) if scale is None else float(scale)
    o = torch.empty_like(q) if out is None else out
    lse = None
    if activation == "softmax":
        lse_shape = (shape.H, shape.S_q) if shape.varlen else (shape.B, shape.H, shape.S_q)
        lse = torch.empty(lse_shape, device=q.device, dtype=torch.float32)
    no_queries = (longest if shape.varlen else shape.S_q) == 0 or shape.B == 0 or shape.H == 0
    if no_queries or shape.S_k == 0:                      # no output rows, or rows that attend no key (output 0)
        o.zero_()
        if lse is not None:
            lse.fill_(float("-inf"))
        return (o, lse) if return_lse else o

    def build(cfg):
        args, grid, meta, cfg = launch_args(q, k, v, o, lse, scale, layout, cfg, features, cu_seqlens_q,
                                            cu_seqlens_k, longest)
        return args, grid, cfg, attention_fwd_kernel.prepare(*args, grid=grid, num_warps=cfg.num_warps,
                                                             backend=backend, sim_options=sim_options, **meta)

    def prepare():
        args, grid, cfg, launch = build(config)
        fit = getattr(launch, "max_active_clusters", None)
        if fit and not cfg.PROGRAMS and fit * cfg.CLUSTER < grid[0]:   # CLUSTER=2: only co-resident clusters
            args, grid, cfg, launch = build(replace(cfg, PROGRAMS=fit * cfg.CLUSTER))
        own = ([args[-3]] if cfg.DYNAMIC else []) + ([args[-1]] if cfg.BALANCED else [])   # tile counter, table
        return holding(launch, *own) if own else launch

    window_key = None if window is None else tuple(window)
    dynamic = resolve_config(shape, features, config).DYNAMIC and q.is_cuda    # one stream per tile counter
    stream = torch.cuda.current_stream(q.device).cuda_stream if dynamic else None
    key = (stream, layout, scale, config, features.causal, window_key, softcap, score_mod, mask_mod, activation,
           backend, id(sim_options), longest, *map(tensor_key, (q, k, v, o, lse, cu_seqlens_q, cu_seqlens_k)))
    _LAST_LAUNCH.get(key, prepare)()
    return (o, lse) if return_lse else o


_LAST_LAUNCH = LaunchCache()


def _ragged(S: int, Sk: int, D: int, config: Config | None = None) -> bool:
    """Whether fixed lengths S/Sk cannot run as fixed with `config`'s blocks (None: the default's)."""
    return S != Sk or S % block_multiple(D, S, config) != 0


def _bshd_as_packed(q, k, v, causal, scale, backend, return_lse, config, out, sim_options, **kw):
    """[B, S, H, D] with S not a block multiple (or keys of another length) is the packed "thd" layout
    with equal-length sequences: same memory, no copy; masks and partial tiles are the varlen path's."""
    import torch
    B, S, H, D = q.shape
    Sk = k.shape[1]
    cu_q = torch.arange(0, B + 1, device=q.device, dtype=torch.int32) * S
    cu_k = torch.arange(0, B + 1, device=q.device, dtype=torch.int32) * Sk
    packed = [t.reshape(B * t.shape[1], t.shape[2], D) for t in (q, k, v)]
    res = attention(*packed, causal=causal, scale=scale, layout="thd", backend=backend, return_lse=return_lse,
                    config=config, cu_seqlens_q=cu_q, cu_seqlens_k=cu_k, sim_options=sim_options,
                    out=None if out is None else out.view(B * S, H, D), **kw)
    if not return_lse:
        return res.view(B, S, H, D)
    o, lse = res
    return o.view(B, S, H, D), lse.view(H, B, S).permute(1, 0, 2)


def tflops(B: int, H: int, S: int, D: int, causal: bool, ms: float) -> float:
    flops = 4 * B * H * S * S * D / (2 if causal else 1)
    return flops / ms / 1e9


__all__ = ["attention", "attention_fwd_kernel", "check_inputs", "check_scale", "check_seqlens", "Config", "Features",
           "launch_args", "Shape", "skip_blocks_possible", "tflops", "triton", "ConfigRejected"]
