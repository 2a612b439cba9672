"""Does the output tensor's placement change a GEMM's time? (docs/design.md: the op's default ran
1-4% below the same Config timed on its own output in bench/gemm.py.) One configuration, one shape,
three output tensors allocated at different points, timed in rotated rounds; prints each output's
median and its spread.   PYTHONPATH=. python3 bench/gemm_placement.py"""
from __future__ import annotations

import statistics

import torch
from triton.testing import do_bench

from bench.order import rotated
from tlx.kernels import gemm

CASES = [((4096, 4096, 512), gemm.Config("pingpong", 128, 128, 64, 5)),
         ((2048, 2048, 2048), gemm.Config("pipelined", 128, 256, 64, 3, 8, 8))]


def main(rounds: int = 9):
    for (m, n, k), cfg in CASES:
        a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
        b = torch.randn(k, n, device="cuda", dtype=torch.bfloat16)
        first = torch.full((m, n), float("nan"), device="cuda", dtype=torch.bfloat16)
        spacer = torch.empty(3 * m * n, device="cuda", dtype=torch.float32)        # pushes the next ones away
        later = [torch.full((m, n), float("nan"), device="cuda", dtype=torch.bfloat16) for _ in range(2)]
        outs = {"first": first, "later1": later[0], "later2": later[1]}
        ref = a.float() @ b.float()
        runs = {"cublas": lambda: torch.matmul(a, b)}
        for name, c in outs.items():
            gemm.matmul(a, b, cfg, out=c)
            torch.cuda.synchronize()
            err = ((c.float() - ref).norm() / ref.norm()).item()
            assert err <= 1e-2, f"{name}: relative error {err}"
            runs[name] = lambda c=c: gemm.matmul(a, b, cfg, out=c)
        times = {name: [] for name in runs}
        for name in rotated(list(runs), rounds):
            times[name].append(do_bench(runs[name], return_mode="median"))
        cublas = statistics.median(times["cublas"])
        cells = "  ".join(f"{name} {cublas / statistics.median(t):.3f} "
                          f"(spread {min(t) * 1e3:.0f}-{max(t) * 1e3:.0f} us)"
                          for name, t in times.items() if name != "cublas")
        print(f"{m}x{n}x{k} {cfg.name()}  ratio to cuBLAS by output:  {cells}", flush=True)
        del spacer


if __name__ == "__main__":
    main()
