"""The library kernels at small shapes, for `python -m tlx demo`: compile, simulate or run+time."""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Callable

import triton
import tlx  # noqa: F401
from tlx.kernels.vector_add import two_task_add


@dataclass
class Case:
    name: str
    kernel: object
    make: Callable          # make(torch, device) -> (args, grid, meta, out, reference)
    num_warps: int = 4
    meta: dict = field(default_factory=dict)

    def compile_args(self):
        import torch
        args, _, self.meta, _, _ = self.make(torch, "cpu")
        return args

    def _check(self, out, ref) -> float:
        return ((out.double() - ref).norm() / ref.norm()).item()

    def run_sim(self) -> tuple[str, bool]:
        import time

        import torch
        args, grid, meta, out, ref = self.make(torch, "cpu")
        out.fill_(float("nan"))
        t0 = time.time()
        self.kernel[grid](*args, num_warps=self.num_warps, backend="sim", **meta)
        err = self._check(out, ref)
        ok = err <= 1e-2
        return f"{self.name:28s} simulator rel_err {err:.2e} {'ok' if ok else 'FAILED'} ({time.time() - t0:.1f} s)", ok

    def run_gpu(self) -> str:
        import torch
        from triton.testing import do_bench
        args, grid, meta, out, ref = self.make(torch, "cuda")
        out.fill_(float("nan"))
        fn = lambda: self.kernel[grid](*args, num_warps=self.num_warps, **meta)   # noqa: E731
        fn()
        torch.cuda.synchronize()
        err = self._check(out, ref)
        return f"{self.name:28s} GPU rel_err {err:.2e}  {do_bench(fn, return_mode='median') * 1e3:.1f} us"


def _vector_add(torch, device):
    n = 5000
    x, y = torch.randn(n, device=device), torch.randn(n, device=device)
    out = torch.empty(n, device=device)
    return (x, y, out, n), (triton.cdiv(n, 1024),), {"BLOCK": 1024}, out, x.double() + y.double()


def _gemm(cfg, M=256, N=256, K=256, programs=None):
    def make(torch, device):
        from tlx.kernels import gemm
        a = torch.randn(M, K, device=device, dtype=torch.float16)
        b = torch.randn(K, N, device=device, dtype=torch.float16)
        c = torch.full((M, N), float("nan"), device=device, dtype=torch.float16)   # poisoned
        args, grid, meta = gemm.launch_args(a, b, c, cfg, programs=programs)
        return args, grid, meta, c, a.double() @ b.double()
    return make


def _attention(cfg, D=64, causal=False, B=1, H=2, S=256):
    def make(torch, device):
        import math

        from tlx.kernels import attention
        q, k, v = (torch.randn(B, H, S, D, device=device, dtype=torch.float16) for _ in range(3))
        o = torch.full_like(q, float("nan"))                  # poisoned: rows left unwritten show
        lse = torch.empty(B, H, S, device=device)
        args, grid, meta, _ = attention.launch_args(q, k, v, o, lse, 1 / math.sqrt(D), "bhsd", cfg,
                                                    attention.Features(causal=causal))
        s = (q.double() @ k.double().transpose(-1, -2)) / math.sqrt(D)
        if causal:
            s = s.masked_fill(torch.ones(S, S, dtype=torch.bool, device=device).triu(1), float("-inf"))
        return args, grid, meta, o, torch.softmax(s, -1) @ v.double()
    return make


def cases() -> list[Case]:
    from tlx.kernels import attention, gemm
    ws, pipe = gemm.Config("ws", 128, 128, 64, 2), gemm.Config("pipelined", 128, 128, 64, 2)
    coop, pingpong = gemm.Config("persistent", 128, 128, 64, 2), gemm.Config("pingpong", 128, 128, 64, 2)
    return [Case("two_task_add", two_task_add, _vector_add),
            Case("gemm pipelined 128x128x64", gemm.matmul_pipelined_kernel, _gemm(pipe), pipe.num_warps),
            Case("gemm warp-specialized", gemm.matmul_ws_kernel, _gemm(ws), ws.num_warps),
            Case("gemm persistent cooperative", gemm.matmul_persistent_kernel, _gemm(coop, 384, 384, programs=3)),
            Case("gemm persistent ping-pong", gemm.matmul_pingpong_kernel, _gemm(pingpong, 384, 384, programs=3)),
            Case("attention causal D=128", attention.attention_fwd_kernel,
                 _attention(attention.Config(), D=128, causal=True)),
            Case("attention pipelined D=128", attention.attention_fwd_kernel,
                 _attention(attention.Config(STAGES=3, PIPELINE=True), D=128)),
            Case("attention K/V multicast D=128", attention.attention_fwd_kernel,   # the default: clusters of 2
                 _attention(replace(attention.default_config(128, 512), PROGRAMS=4), D=128, S=512)),
            Case("attention balanced D=64", attention.attention_fwd_kernel,
                 _attention(attention.Config(PERSISTENT=True, PROGRAMS=2, P_EARLY=True, BALANCED=True, DYNAMIC=True),
                            D=64, causal=True, S=512)),
            Case("attention 3 consumers D=64", attention.attention_fwd_kernel,
                 _attention(attention.Config(BM=192, STAGES=3, PIPELINE=True, PINGPONG=True), D=64)),
            Case("attention 192-key blocks D=128", attention.attention_fwd_kernel,   # 2 x 192 + a 128-key tail
                 _attention(attention.Config(BN=192, STAGES=2, PIPELINE=True, PINGPONG=True, RELEASE_K_EARLY=True),
                            D=128, S=512)),
            Case("attention D=256 K released", attention.attention_fwd_kernel,
                 _attention(attention.Config(BN=64, PIPELINE=True, RELEASE_K_EARLY=True, PERSISTENT=True, PROGRAMS=2),
                            D=256, causal=True))]
