"""Attention forward on Hopper in the TLX surface (FlashAttention-3 structure).

One program computes a BM=128-row block of queries of one (batch, head). The default task is the
TMA producer: it loads the two 64-row halves of Q once, then streams K and V blocks through a
STAGES-deep ring (K and V on separate barriers, so QK^T can start before V lands). Two consumer
warp groups (one task replicated twice) each own 64 query rows: S = Q K^T by wgmma from shared
memory, online softmax in registers (exp2, scale folded into log2 domain), O += P V with P fed to
wgmma from registers. Both consumers release a K/V stage (arrive_count=2). The output goes back
through Q's shared buffer (Q is dead by then) with a TMA store; LSE (natural log) per row.

Tensors are addressed as 2-D row-major views: layout "bhsd" views [B*H*S, D]; "bshd" views
[B*S, H*D] (head h at column h*D). S must be a multiple of the block sizes (checked).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import triton
import triton.language as tl

import tlx
from tlx.errors import ConfigRejected

LOG2E = 1.4426950408889634


@tlx.jit
def attention_block(j, q_buf, k_bufs, v_bufs, k_full, v_full, kv_empty, m_i, l_i, acc, rows, qk_scale,
                    cid: tl.constexpr, BN: tl.constexpr, STAGES: tl.constexpr, MASK: tl.constexpr,
                    PINGPONG: tl.constexpr):
    """One K/V block for one consumer: S = Q K^T, online softmax, O += P V; releases the stage.
    PINGPONG: the two consumers take turns at the tensor cores (named barriers 8 and 9), so one
    group's softmax overlaps the other's wgmma."""
    s, p = tlx.warp_spec.get_bufidx_phase(j, STAGES)
    tlx.barrier_wait(k_full[s], p)
    if PINGPONG:
        tlx.named_barrier_wait(8 + cid, 256)
    qk = tlx.async_dot(q_buf, tlx.local_trans(k_bufs[s]))
    qk = tlx.async_dot_wait(0, qk)
    if PINGPONG:
        tlx.named_barrier_arrive(9 - cid, 256)
    qk = qk * qk_scale
    if MASK:
        cols = j * BN + tl.arange(0, BN)
        qk = tl.where(cols[None, :] <= rows[:, None], qk, float("-inf"))
    m_new = tl.maximum(m_i, tl.max(qk, 1))
    prob = tl.exp2(qk - m_new[:, None])
    alpha = tl.exp2(m_i - m_new)
    l_i = l_i * alpha + tl.sum(prob, 1)
    acc = acc * alpha[:, None]
    tlx.barrier_wait(v_full[s], p)
    acc = tlx.async_dot(prob.to(tlx.dtype_of(q_buf)), v_bufs[s], acc)
    acc = tlx.async_dot_wait(0, acc)
    tlx.barrier_arrive(kv_empty[s])
    return m_new, l_i, acc


@tlx.jit
def attention_fwd_kernel(q_desc, k_desc, v_desc, o_desc, lse_ptr, qk_scale, S, H, KV_GROUP,
                         ROW_B, ROW_H, COL_H, KV_ROW_B, KV_ROW_H, KV_COL_H,
                         D: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr, STAGES: tl.constexpr,
                         CAUSAL: tl.constexpr, PINGPONG: tl.constexpr):
    HALF: tl.constexpr = BM // 2
    m0 = tl.program_id(0) * BM
    bh = tl.program_id(1)
    b = bh // H
    h = bh % H
    hk = h // KV_GROUP
    q_row = b * ROW_B + h * ROW_H + m0
    q_col = h * COL_H
    kv_row = b * KV_ROW_B + hk * KV_ROW_H
    kv_col = hk * KV_COL_H
    dtype = tlx.dtype_of(q_desc)
    q_bufs = tlx.local_alloc((HALF, D), dtype, 2)
    k_bufs = tlx.local_alloc((BN, D), dtype, STAGES)
    v_bufs = tlx.local_alloc((BN, D), dtype, STAGES)
    q_full = tlx.alloc_barriers(2)
    k_full = tlx.alloc_barriers(STAGES)
    v_full = tlx.alloc_barriers(STAGES)
    kv_empty = tlx.alloc_barriers(STAGES, arrive_count=2)
    if CAUSAL:
        hi = tl.minimum(m0 + BM, S)
    else:
        hi = S
    n_blocks = tl.cdiv(hi, BN)
    with tlx.async_tasks():
        with tlx.async_task("default"):                                  # producer
            for c in tl.static_range(2):
                tlx.barrier_expect_bytes(q_full[c], HALF * D * tlx.size_of(dtype))
                tlx.async_descriptor_load(q_desc, q_bufs[c], [q_row + c * HALF, q_col], q_full[c])
            for j in range(n_blocks):
                s, p = tlx.warp_spec.get_bufidx_phase(j, STAGES)
                tlx.barrier_wait(kv_empty[s], p ^ 1)
                tlx.barrier_expect_bytes(k_full[s], BN * D * tlx.size_of(dtype))
                tlx.async_descriptor_load(k_desc, k_bufs[s], [kv_row + j * BN, kv_col], k_full[s])
                tlx.barrier_expect_bytes(v_full[s], BN * D * tlx.size_of(dtype))
                tlx.async_descriptor_load(v_desc, v_bufs[s], [kv_row + j * BN, kv_col], v_full[s])
        with tlx.async_task(num_warps=4, registers=240, replicate=2):    # consumers
            cid = tlx.async_task_replica_id()
            tlx.barrier_wait(q_full[cid], 0)
            m_i = tl.full((HALF,), float("-inf"), tl.float32)
            l_i = tl.zeros((HALF,), tl.float32)
            acc = tl.zeros((HALF, D), tl.float32)
            rows = m0 + cid * HALF + tl.arange(0, HALF)
            if PINGPONG:
                if cid == 1:
                    tlx.named_barrier_arrive(8, 256)                     # consumer 0 goes first
            if CAUSAL:
                n_free = (m0 + cid * HALF + 1) // BN                     # blocks left of the diagonal
            else:
                n_free = n_blocks
            for j in range(0, n_free):
                m_i, l_i, acc = attention_block(j, q_bufs[cid], k_bufs, v_bufs, k_full, v_full, kv_empty, m_i,
                                                l_i, acc, rows, qk_scale, cid, BN, STAGES, False, PINGPONG)
            for j in range(n_free, n_blocks):                            # the diagonal: masked
                m_i, l_i, acc = attention_block(j, q_bufs[cid], k_bufs, v_bufs, k_full, v_full, kv_empty, m_i,
                                                l_i, acc, rows, qk_scale, cid, BN, STAGES, True, PINGPONG)
            out = acc / l_i[:, None]
            tlx.local_store(q_bufs[cid], out.to(dtype))                  # Q is dead: reuse its buffer
            tlx.fence_async_shared()
            tlx.async_descriptor_store(o_desc, q_bufs[cid], [q_row + cid * HALF, q_col])
            tl.store(lse_ptr + bh * S + rows, (m_i + tl.log2(l_i)) / 1.4426950408889634)
            tlx.async_descriptor_store_wait(0)


@dataclass(frozen=True)
class Config:
    BM: int = 128
    BN: int = 128
    STAGES: int = 2
    PINGPONG: bool = False
    num_warps: int = 4


def default_config(D: int) -> Config:
    return Config(BN=64) if D > 128 else Config()


LAYOUTS = ("bhsd", "bshd")


def check_inputs(q, k, v, layout: str) -> tuple[int, int, int, int, int]:
    """(B, H, H_kv, S, D), after checking everything the kernel assumes."""
    if layout not in LAYOUTS:
        raise ValueError(f"tlx.attention: 'layout' must be one of {LAYOUTS}, got {layout!r}")
    for name, t in (("q", q), ("k", k), ("v", v)):
        if t.dim() != 4:
            raise ValueError(f"tlx.attention: '{name}' must be 4-D [{layout.upper()}], got shape {tuple(t.shape)}")
        if t.dtype not in (q.dtype,) or str(t.dtype) not in ("torch.float16", "torch.bfloat16"):
            raise ValueError(f"tlx.attention: q, k, v must all be float16 or bfloat16, got {q.dtype}, {k.dtype}, "
                             f"{v.dtype}")
        if t.device != q.device:
            raise ValueError(f"tlx.attention: q, k, v must be on one device, got {q.device}, {t.device}")
        if not t.is_contiguous():
            raise ValueError(f"tlx.attention: '{name}' must be contiguous in layout {layout!r}")
    if layout == "bhsd":
        B, H, S, D = q.shape
        Hk, Sk = k.shape[1], k.shape[2]
    else:
        B, S, H, D = q.shape
        Sk, Hk = k.shape[1], k.shape[2]
    if k.shape != v.shape or k.shape[0] != B or k.shape[-1] != D:
        raise ValueError(f"tlx.attention: k and v must have shape [B, ..., D] matching q, got {tuple(k.shape)} and "
                         f"{tuple(v.shape)} for q {tuple(q.shape)}")
    if D not in (64, 128, 256):
        raise ValueError(f"tlx.attention: head dim must be 64, 128 or 256, got {D}")
    if H % Hk:
        raise ValueError(f"tlx.attention: query heads ({H}) must be a multiple of key/value heads ({Hk}) for GQA")
    if Sk != S:
        raise ValueError(f"tlx.attention: key length {Sk} must equal query length {S} (cross-attention lengths "
                         "are not supported yet)")
    cfg = default_config(D)
    if S % cfg.BM or S % cfg.BN:
        raise ValueError(f"tlx.attention: sequence length must be a multiple of {max(cfg.BM, cfg.BN)}, got {S}")
    return B, H, Hk, S, D


def launch_args(q, k, v, o, lse, causal: bool, scale: float, layout: str, cfg: Config | None = None):
    B, H, Hk, S, D = check_inputs(q, k, v, layout)
    cfg = cfg or default_config(D)
    half = cfg.BM // 2
    if layout == "bhsd":
        q2, k2, v2, o2 = (t.reshape(-1, D) for t in (q, k, v, o))
        strides = (H * S, S, 0, Hk * S, S, 0)
    else:
        q2, o2 = q.reshape(B * S, H * D), o.reshape(B * S, H * D)
        k2, v2 = k.reshape(B * S, Hk * D), v.reshape(B * S, Hk * D)
        strides = (S, 0, D, S, 0, D)
    descs = [tlx.TensorDescriptor.from_tensor(q2, [half, D]), tlx.TensorDescriptor.from_tensor(k2, [cfg.BN, D]),
             tlx.TensorDescriptor.from_tensor(v2, [cfg.BN, D]), tlx.TensorDescriptor.from_tensor(o2, [half, D])]
    args = (*descs, lse, scale * 1.4426950408889634, S, H, H // Hk, *strides)
    grid = (S // cfg.BM, B * H)
    return args, grid, dict(D=D, BM=cfg.BM, BN=cfg.BN, STAGES=cfg.STAGES, CAUSAL=bool(causal),
                            PINGPONG=cfg.PINGPONG), cfg


def attention(q, k, v, causal: bool = False, scale: float | None = None, layout: str = "bhsd",
              backend: str | None = None, return_lse: bool = False, config: Config | None = None):
    """softmax(q k^T * scale [+ causal mask]) v; q [B, H, S, D] (or [B, S, H, D] with layout="bshd")."""
    import torch
    D = q.shape[-1]
    scale = 1.0 / math.sqrt(D) if scale is None else float(scale)
    o = torch.empty_like(q)
    B, H, S = (q.shape[0], q.shape[1], q.shape[2]) if layout == "bhsd" else (q.shape[0], q.shape[2], q.shape[1])
    lse = torch.empty((B, H, S), device=q.device, dtype=torch.float32)
    args, grid, meta, cfg = launch_args(q, k, v, o, lse, causal, scale, layout, config)   # o, lse are new
    attention_fwd_kernel[grid](*args, num_warps=cfg.num_warps, backend=backend, **meta)
    return (o, lse) if return_lse else o


def tflops(B: int, H: int, S: int, D: int, causal: bool, ms: float) -> float:
    flops = 4 * B * H * S * S * D / (2 if causal else 1)
    return flops / ms / 1e9


__all__ = ["attention", "attention_fwd_kernel", "Config", "launch_args", "tflops", "triton", "ConfigRejected"]
