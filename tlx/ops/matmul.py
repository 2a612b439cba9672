"""`tlx.ops.matmul` / `torch.ops.tlx.matmul`: C = act(A @ B + bias) on the tlx GEMM kernels."""
from __future__ import annotations

import torch

from ..kernels import gemm


@torch.library.custom_op("tlx::matmul", mutates_args=())
def _matmul_op(a: torch.Tensor, b: torch.Tensor, bias: torch.Tensor | None = None, activation: str | None = None,
               out_dtype: torch.dtype | None = None) -> torch.Tensor:
    if a.device.type != "cuda":
        raise ValueError(f"tlx.matmul: 'a' must be a CUDA tensor (the kernels run on Hopper GPUs), got {a.device}; "
                         "use tlx.kernels.gemm.matmul(..., backend='sim') to simulate on the CPU")
    return gemm.matmul(a, b, bias=bias, activation=activation, out_dtype=out_dtype)


@_matmul_op.register_fake
def _matmul_fake(a, b, bias=None, activation=None, out_dtype=None):
    gemm.check_operands(a, b, bias, activation, out_dtype)
    return a.new_empty((a.shape[0], b.shape[1]), dtype=out_dtype or a.dtype)


def matmul(a: torch.Tensor, b: torch.Tensor, bias: torch.Tensor | None = None, activation: str | None = None,
           out_dtype: torch.dtype | None = None) -> torch.Tensor:
    """act(a @ b + bias) for fp16/bf16 `a` [M, K] and `b` [K, N] (either may be column-major);
    `activation` in (None, "relu", "gelu", "silu"); `out_dtype` the input dtype (default) or float32."""
    gemm.check_operands(a, b, bias, activation, out_dtype)
    return torch.ops.tlx.matmul(a, b, bias, activation, out_dtype)
