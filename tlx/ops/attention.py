"""`tlx.ops.attention` / `torch.ops.tlx.attention`: attention forward on the tlx Hopper kernel.

`score_mod` and `mask_mod` are @tlx.jit functions compiled into the kernel: they are not tensors, so
they cannot cross a torch custom-op boundary. The registered op covers everything else (and has a
fake implementation for torch.compile); a call with a score_mod or mask_mod runs the kernel directly
from Python (eager only: torch.compile sees it as an opaque Python call and graph-breaks there).
"""
from __future__ import annotations

import torch

from ..kernels import attention as kernel


def _require_cuda(q: torch.Tensor) -> None:
    if q.device.type != "cuda":
        raise ValueError(f"tlx.attention: 'q' must be a CUDA tensor (the kernel runs on Hopper GPUs), got "
                         f"{q.device}; use tlx.kernels.attention.attention(..., backend='sim') to simulate on the CPU")


@torch.library.custom_op("tlx::attention", mutates_args=())
def _attention_op(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool, window_left: int | None,
                  window_right: int | None, scale: float | None, softcap: float | None,
                  cu_seqlens_q: torch.Tensor | None, cu_seqlens_k: torch.Tensor | None, activation: str,
                  layout: str) -> torch.Tensor:
    _require_cuda(q)
    window = None if window_left is None and window_right is None else (window_left, window_right)
    return kernel.attention(q, k, v, causal, scale, layout, window=window, softcap=softcap,
                            cu_seqlens_q=cu_seqlens_q, cu_seqlens_k=cu_seqlens_k, activation=activation)


@_attention_op.register_fake
def _attention_fake(q, k, v, causal, window_left, window_right, scale, softcap, cu_seqlens_q, cu_seqlens_k,
                    activation, layout):
    window = None if window_left is None and window_right is None else (window_left, window_right)
    kernel.Features(bool(causal), window, softcap, None, None, activation)
    kernel.check_inputs(q, k, v, layout, cu_seqlens_q, cu_seqlens_k)   # cu_seqlens values need data: not here
    return torch.empty_like(q)


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool = False, window=None,
              scale: float | None = None, softcap: float | None = None, score_mod=None, mask_mod=None,
              cu_seqlens_q: torch.Tensor | None = None, cu_seqlens_k: torch.Tensor | None = None,
              activation: str = "softmax", layout: str = "bhsd") -> torch.Tensor:
    """act(scale * q k^T [softcap, score_mod, masks]) v for fp16/bf16 q [B, H, S, D], k/v [B, H_kv, S, D]
    (H a multiple of H_kv: GQA/MQA). layout "bshd": [B, S, H, D]; "thd": packed [total, H, D] with int32
    prefix sums cu_seqlens_q/k. window=(left, right): query i attends keys i-left <= j <= i+right (None:
    unbounded on that side), combined with causal. activation "softmax" (default), "gelu" or "silu"
    (no normalization). score_mod(score, b, h, q_idx, kv_idx) / mask_mod(b, h, q_idx, kv_idx): @tlx.jit
    functions fused into the kernel (called directly, not through torch.ops.tlx.attention). `scale`
    defaults to 1/sqrt(D) and must be >= 0 with softmax (the kernel takes row maxima before scaling)."""
    features = kernel.Features(bool(causal), window, softcap, score_mod, mask_mod, activation)
    kernel.check_scale(scale, activation)
    kernel.check_inputs(q, k, v, layout, cu_seqlens_q, cu_seqlens_k)
    _require_cuda(q)
    if score_mod is not None or mask_mod is not None:
        return kernel.attention(q, k, v, causal, scale, layout, window=window, softcap=softcap, score_mod=score_mod,
                                mask_mod=mask_mod, cu_seqlens_q=cu_seqlens_q, cu_seqlens_k=cu_seqlens_k,
                                activation=activation)
    left, right = features.window if features.window is not None else (None, None)
    return torch.ops.tlx.attention(q, k, v, bool(causal), left, right, None if scale is None else float(scale),
                                   None if softcap is None else float(softcap), cu_seqlens_q, cu_seqlens_k,
                                   activation, layout)
