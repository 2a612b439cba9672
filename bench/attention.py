"""Time tlx attention forward against SDPA (cuDNN and flash backends) side by side on one GPU.

FA3 sizing: B*S = 16384, H*D = 2048.   PYTHONPATH=. python3 bench/attention.py --out FILE
"""
from __future__ import annotations

import argparse
import datetime
import json
import math

import torch
import torch.nn.functional as F
import triton
from torch.nn.attention import SDPBackend, sdpa_kernel
from triton.testing import do_bench

from tlx.kernels import attention


def sdpa(backend):
    def run(q, k, v, causal):
        with sdpa_kernel(backend):
            return F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    return run


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="bench/results/attention.json")
    ap.add_argument("--dtype", default="bfloat16")
    args = ap.parse_args()
    dtype = getattr(torch, args.dtype)
    def tlx_impl(pingpong):
        def run(q, k, v, c):
            cfg = attention.Config(BN=64 if q.shape[-1] > 128 else 128, PINGPONG=pingpong)
            return attention.attention(q, k, v, causal=c, config=cfg)
        return run

    impls = {"tlx": tlx_impl(False), "tlx_pingpong": tlx_impl(True),
             "cudnn": sdpa(SDPBackend.CUDNN_ATTENTION), "flash": sdpa(SDPBackend.FLASH_ATTENTION)}
    rows = []
    for D in (64, 128, 256):
        for S in (1024, 2048, 4096, 8192, 16384):
            for causal in (False, True):
                B, H = 16384 // S, 2048 // D
                q, k, v = (torch.randn(B, H, S, D, device="cuda", dtype=dtype) for _ in range(3))
                ref = F.scaled_dot_product_attention(q.float(), k.float(), v.float(), is_causal=causal) \
                    if S <= 4096 else None
                row = {"D": D, "S": S, "B": B, "H": H, "causal": causal}
                for name, fn in impls.items():
                    try:
                        out = fn(q, k, v, causal)
                        torch.cuda.synchronize()
                        if ref is not None:
                            row[f"{name}_rel_err"] = ((out.float() - ref).norm() / ref.norm()).item()
                        ms = do_bench(lambda: fn(q, k, v, causal), return_mode="median")
                        row[f"{name}_tflops"] = attention.tflops(B, H, S, D, causal, ms)
                    except Exception as e:   # recorded, never hidden
                        row[f"{name}_error"] = f"{type(e).__name__}: {e}"[:200]
                best = max((row[f"{n}_tflops"], n) for n in ("tlx", "tlx_pingpong") if f"{n}_tflops" in row) \
                    if any(f"{n}_tflops" in row for n in ("tlx", "tlx_pingpong")) else None
                if best and "cudnn_tflops" in row:
                    row["best"] = best[1]
                    row["best_tflops"] = best[0]
                    row["ratio_cudnn"] = best[0] / row["cudnn_tflops"]
                rows.append(row)
                print(f"D={D:3d} S={S:5d} causal={int(causal)}  tlx {row.get('tlx_tflops', 0):6.1f}  "
                      f"pp {row.get('tlx_pingpong_tflops', 0):6.1f}  "
                      f"cudnn {row.get('cudnn_tflops', 0):6.1f}  flash {row.get('flash_tflops', 0):6.1f}  "
                      f"ratio {row.get('ratio_cudnn', float('nan')):.3f}  err {row.get('tlx_rel_err', -1):.1e}",
                      flush=True)
    meta = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "triton": triton.__version__,
            "date": datetime.date.today().isoformat(), "dtype": args.dtype, "timer": "do_bench median"}
    ratios = [r["ratio_cudnn"] for r in rows if "ratio_cudnn" in r]
    if ratios:
        meta["geomean_ratio_cudnn"] = math.exp(sum(map(math.log, ratios)) / len(ratios))
    with open(args.out, "w") as f:
        json.dump({"meta": meta, "rows": rows}, f, indent=1)
    print(json.dumps(meta))


if __name__ == "__main__":
    main()
