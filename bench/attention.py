"""Time tlx attention forward against SDPA (cuDNN and flash backends) side by side on one GPU.

FA3 sizing: B*S = 16384, H*D = 2048.   PYTHONPATH=. python3 bench/attention.py --out FILE [--rounds 3] [--graph]
Each cell is checked once (the op writes into a NaN-poisoned output, compared with an fp32 reference up to
4096 keys), then timed in `--rounds` rotated rounds; `--graph` adds CUDA-graph timings of the op and cuDNN.
Feature rows follow (sliding window, softcap, GQA): TFLOP/s counted over the (query, key) pairs
actually attended, next to the plain kernel on the same shape (and SDPA for GQA).
"""
from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import math
import statistics

import torch
import torch.nn.functional as F
import triton
from torch.nn.attention import SDPBackend, sdpa_kernel
from triton.testing import do_bench, do_bench_cudagraph

from bench.order import rotated
from tlx.kernels import attention


REFERENCE_MAX_KEYS = 4096      # the fp32 reference's S x S scores outgrow memory beyond


def fa3_inputs(D: int, S: int, dtype):
    """FA3 sizing (B*S = 16384, H*D = 2048): B, H and random normal q, k, v [B, H, S, D] on the GPU."""
    B, H = 16384 // S, 2048 // D
    q, k, v = (torch.randn(B, H, S, D, device="cuda", dtype=dtype) for _ in range(3))
    return B, H, q, k, v


def fp32_reference(q, k, v, causal):
    return F.scaled_dot_product_attention(q.float(), k.float(), v.float(), is_causal=causal)


def sdpa(backend):
    def run(q, k, v, causal):
        with sdpa_kernel(backend):
            return F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    return run


def pipeline_config(D: int) -> attention.Config:
    """FA3-style overlap in each consumer; D=256: two 64-key stages are what fits shared memory, and
    it needs RELEASE_K_EARLY to load a block ahead (without it 0.79-0.82x the plain kernel, sweep run 8)."""
    if D > 128:
        return attention.Config(BN=64, STAGES=2, PIPELINE=True, RELEASE_K_EARLY=True)
    return attention.Config(STAGES=3, PIPELINE=True)


def plain_config(D: int, S: int, causal: bool) -> attention.Config:
    """The op's block sizes (two consumers) without any other option (PIPELINE, PINGPONG, PERSISTENT,
    O_BUFFER, PIN_WAIT, P_EARLY): the kernel the others build on. (Until attention-run10 the last
    three were inherited from the default.)"""
    return attention.Config(BN=attention.default_config(D, S, causal).BN)


def pipelined(D: int, **kw):
    """A PIPELINE variant (pipeline_config with `kw` replaced)."""
    return dataclasses.replace(pipeline_config(D), **kw)


# Columns: None = the op's own choice (config=None: default_config on the op's path); otherwise a
# function of (D, S, causal) giving the config, or None where the variant does not apply.
VARIANTS = {
    "tlx": None,
    "tlx_base": plain_config,
    "tlx_pipeline": lambda D, S, c: pipelined(D),
    "tlx_pipeline_pingpong": lambda D, S, c: pipelined(D, PINGPONG=True),
    "tlx_persistent": lambda D, S, c: dataclasses.replace(plain_config(D, S, c), PERSISTENT=True),
    "tlx_persistent_pingpong": lambda D, S, c: dataclasses.replace(plain_config(D, S, c), PERSISTENT=True,
                                                                    PINGPONG=True),
    "tlx_persistent_pipeline_pingpong": lambda D, S, c: pipelined(D, STAGES=2, PINGPONG=True, PERSISTENT=True),
    "tlx_three_consumers": lambda D, S, c: attention.Config(BM=192, STAGES=3, PIPELINE=True, PINGPONG=True)
    if D == 64 else None,
    "tlx_static": lambda D, S, c: static_config(attention.default_config(D, S, c)),
}


def static_config(cfg: attention.Config) -> attention.Config | None:
    """The default's kernel with tile_of's fixed rounds where the default deals BALANCED tiles (else None)."""
    return dataclasses.replace(cfg, BALANCED=False, DYNAMIC=False) if cfg.BALANCED else None


class NotApplicable(Exception):
    pass


def tlx_variant(variant):
    def run(q, k, v, causal, out=None):
        cfg = None
        if variant is not None:
            cfg = variant(q.shape[-1], q.shape[2], causal)
            if cfg is None:
                raise NotApplicable
        return attention.attention(q, k, v, causal=causal, config=cfg, out=out)
    return run


def attended_pairs(S: int, window, causal: bool) -> int:
    left, right = window if window is not None else (None, None)
    right = 0 if causal else right
    i = torch.arange(S)
    lo = (i - left).clamp(min=0) if left is not None else torch.zeros_like(i)
    hi = (i + right).clamp(max=S - 1) if right is not None else torch.full_like(i, S - 1)
    return int((hi - lo + 1).sum())


def feature_reference(q, k, v, causal, window, softcap):
    """float32 softmax attention with an explicit mask (GQA expanded): for the error column."""
    g = q.shape[1] // k.shape[1]
    k, v = k.float().repeat_interleave(g, 1), v.float().repeat_interleave(g, 1)
    s = q.float() @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
    if softcap:
        s = softcap * torch.tanh(s / softcap)
    S = q.shape[2]
    i, j = torch.arange(S, device=q.device)[:, None], torch.arange(S, device=q.device)[None, :]
    keep = torch.ones(S, S, dtype=torch.bool, device=q.device)
    left, right = window if window is not None else (None, None)
    keep &= (j <= i) if causal else True
    keep &= (j >= i - left) if left is not None else True
    keep &= (j <= i + right) if right is not None else True
    return torch.softmax(s.masked_fill(~keep, float("-inf")), -1) @ v


FEATURES = [  # name, H_kv divisor, causal, window, softcap
    ("window_1024_causal", 1, True, (1024, None), None), ("window_512_512", 1, False, (512, 512), None),
    ("softcap_50", 1, False, None, 50.0), ("softcap_50_causal", 1, True, None, 50.0),
    ("gqa_8", 8, False, None, None), ("gqa_8_causal", 8, True, None, None), ("mqa_causal", 0, True, None, None),
]


def feature_rows(dtype) -> list[dict]:
    rows = []
    for name, group, causal, window, softcap in FEATURES:
        for D, S in ((128, 4096), (128, 16384), (64, 8192)):
            B, H = 16384 // S, 2048 // D
            hkv = 1 if group == 0 else H // group
            q = torch.randn(B, H, S, D, device="cuda", dtype=dtype)
            k, v = (torch.randn(B, hkv, S, D, device="cuda", dtype=dtype) for _ in range(2))
            row = {"feature": name, "D": D, "S": S, "B": B, "H": H, "H_kv": hkv, "causal": causal}
            flops = 4 * B * H * D * attended_pairs(S, window, causal)
            runs = {"tlx": lambda out=None: attention.attention(q, k, v, causal=causal, window=window, softcap=softcap,
                                                                out=out),
                    "tlx_base": lambda: attention.attention(q, k, v, causal=causal, window=window, softcap=softcap,
                                                            config=attention.Config()),   # no PIPELINE
                    "tlx_plain": lambda: attention.attention(q, k, v, causal=causal)}   # the op's own configs
            if group != 1:
                runs["flash"] = lambda: sdpa_gqa(SDPBackend.FLASH_ATTENTION, q, k, v, causal)
                runs["cudnn"] = lambda: sdpa_gqa(SDPBackend.CUDNN_ATTENTION, q, k, v, causal)
            for impl, fn in runs.items():
                try:
                    out = fn(torch.full_like(q, float("nan"))) if impl == "tlx" else fn()   # checked: poisoned
                    torch.cuda.synchronize()
                    if impl == "tlx" and S <= 4096:
                        ref = feature_reference(q, k, v, causal, window, softcap)
                        row["tlx_rel_err"] = ((out.float() - ref).norm() / ref.norm()).item()
                    ms = do_bench(fn, return_mode="median")
                    plain_flops = 4 * B * H * D * attended_pairs(S, None, causal)
                    row[f"{impl}_tflops"] = (flops if impl in ("tlx", "tlx_base") else plain_flops) / ms / 1e9
                except Exception as e:   # recorded, never hidden
                    row[f"{impl}_error"] = f"{type(e).__name__}: {e}"[:200]
            rows.append(row)
            print(f"{name:20s} D={D:3d} S={S:5d}  tlx {row.get('tlx_tflops', 0):6.1f}  base "
                  f"{row.get('tlx_base_tflops', 0):6.1f}  plain "
                  f"{row.get('tlx_plain_tflops', 0):6.1f}  flash {row.get('flash_tflops', 0):6.1f}  "
                  f"err {row.get('tlx_rel_err', -1):.1e}", flush=True)
    return rows


def sdpa_gqa(backend, q, k, v, causal):
    with sdpa_kernel(backend):
        return F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="bench/results/attention.json")
    ap.add_argument("--dtype", default="bfloat16")
    ap.add_argument("--dims", default="64,128,256", help="head dims to time, comma-separated")
    ap.add_argument("--no-features", action="store_true", help="skip the feature rows")
    ap.add_argument("--rounds", type=int, default=1,
                    help="timing rounds per cell, each starting further along the implementations (bench/order.py); "
                         "medians reported, each round's TFLOPS kept in the JSON")
    ap.add_argument("--graph", action="store_true",
                    help="also time the op's default and cuDNN as CUDA graph replays (kernel against kernel, no host "
                         "launch cost; do_bench_cudagraph median): columns *_graph_tflops and graph_ratio_cudnn")
    ap.add_argument("--rep", type=int, default=100,
                    help="milliseconds of timed calls per measurement (do_bench's rep; its default 100). Both kernels "
                         "run at the card's power limit, where longer windows read steadier (bench/clock_probe.py)")
    ap.add_argument("--variants", default=",".join(VARIANTS),
                    help="tlx columns to time, comma-separated (the op's default, 'tlx', always runs)")
    args = ap.parse_args()
    if args.rounds < 1:
        raise SystemExit(f"--rounds must be at least 1, got {args.rounds}")
    if args.rep < 10:
        raise SystemExit(f"--rep must be at least 10 ms, got {args.rep}")
    dtype = getattr(torch, args.dtype)
    wanted = {"tlx", *args.variants.split(",")}
    if wanted - set(VARIANTS):
        raise SystemExit(f"--variants: unknown {sorted(wanted - set(VARIANTS))}; known: {', '.join(VARIANTS)}")
    impls = {name: tlx_variant(variant) for name, variant in VARIANTS.items() if name in wanted}
    impls.update(cudnn=sdpa(SDPBackend.CUDNN_ATTENTION), flash=sdpa(SDPBackend.FLASH_ATTENTION))
    rows = []
    meta = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "triton": triton.__version__,
            "date": datetime.date.today().isoformat(), "dtype": args.dtype, "timer": "do_bench median",
            "rounds": args.rounds, "rep_ms": args.rep}

    def save():                                                   # after every row: a part killed at its
        for key in ("ratio_cudnn", "graph_ratio_cudnn"):              # time limit keeps what it timed
            ratios = [r[key] for r in rows if key in r]
            if ratios:
                meta[f"geomean_{key}"] = statistics.geometric_mean(ratios)
        with open(args.out, "w") as f:
            json.dump({"meta": meta, "rows": rows}, f, indent=1)
    for D in map(int, args.dims.split(",")):
        for S in (1024, 2048, 4096, 8192, 16384):
            for causal in (False, True):
                B, H, q, k, v = fa3_inputs(D, S, dtype)
                ref = fp32_reference(q, k, v, causal) if S <= REFERENCE_MAX_KEYS else None
                row = {"D": D, "S": S, "B": B, "H": H, "causal": causal}
                timed = []                                     # the implementations whose checked run worked
                for name in impls:
                    fn = impls[name]
                    poisoned = {"out": torch.full_like(q, float("nan"))} if name.startswith("tlx") else {}
                    try:
                        out = fn(q, k, v, causal, **poisoned)          # the checked run writes into NaNs
                        torch.cuda.synchronize()
                        if ref is not None and name.startswith("tlx"):
                            row[f"{name}_rel_err"] = ((out.float() - ref).norm() / ref.norm()).item()
                        timed.append(name)
                    except NotApplicable:
                        pass
                    except Exception as e:   # recorded, never hidden
                        row[f"{name}_error"] = f"{type(e).__name__}: {e}"[:200]
                eager, graph = {n: [] for n in timed}, {n: [] for n in timed if args.graph and n in ("tlx", "cudnn")}
                for name in rotated(timed, rounds=args.rounds, first=len(rows), spread=True):
                    fn = impls[name]
                    try:
                        eager[name].append(do_bench(lambda: fn(q, k, v, causal), rep=args.rep, return_mode="median"))
                        if name in graph:
                            graph[name].append(do_bench_cudagraph(lambda: fn(q, k, v, causal), rep=args.rep,
                                                                  return_mode="median"))
                    except Exception as e:   # recorded, never hidden
                        row[f"{name}_error"] = f"{type(e).__name__}: {e}"[:200]
                for name, times in eager.items():
                    if times:
                        row[f"{name}_tflops"] = attention.tflops(B, H, S, D, causal, statistics.median(times))
                        if args.rounds > 1:
                            row[f"{name}_tflops_rounds"] = [attention.tflops(B, H, S, D, causal, t) for t in times]
                for name, times in graph.items():
                    if times:
                        row[f"{name}_graph_tflops"] = attention.tflops(B, H, S, D, causal, statistics.median(times))
                if "tlx_tflops" in row and "cudnn_tflops" in row:       # the op's default configuration
                    row["ratio_cudnn"] = row["tlx_tflops"] / row["cudnn_tflops"]
                    best = max(row.get(f"{n}_tflops", 0.0) for n in impls if n.startswith("tlx"))
                    row["best_ratio_cudnn"] = best / row["cudnn_tflops"]
                if "tlx_graph_tflops" in row and "cudnn_graph_tflops" in row:
                    row["graph_ratio_cudnn"] = row["tlx_graph_tflops"] / row["cudnn_graph_tflops"]
                rows.append(row)
                save()
                cells = "  ".join(f"{n.replace('tlx_', '')} {row.get(n + '_tflops', 0):6.1f}" for n in impls)
                graph_note = f"  graph ratio {row['graph_ratio_cudnn']:.3f}" if "graph_ratio_cudnn" in row else ""
                print(f"D={D:3d} S={S:5d} causal={int(causal)}  {cells}  ratio {row.get('ratio_cudnn', float('nan')):.3f}"
                      f"{graph_note}  err {row.get('tlx_rel_err', -1):.1e}", flush=True)
    if not args.no_features:
        rows += feature_rows(dtype)
        save()
    print(json.dumps(meta))


if __name__ == "__main__":
    main()
