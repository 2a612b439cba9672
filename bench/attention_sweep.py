"""Which attention configuration is fastest per head dim: a few shapes, every candidate, cuDNN alongside.
The table behind `attention.default_config`. Each row times cuDNN and the candidates in an order that
starts one further along per row (the first-timed one ran up to 13% fast, attention-run6).
    PYTHONPATH=. python3 bench/attention_sweep.py --out FILE [--dims 64] [--lengths 2048,8192] [--only REGEX] [--rounds N]
        [--causal both|yes|no]"""
from __future__ import annotations

import argparse
import datetime
import json
import re
import statistics
from dataclasses import replace

import torch
import torch.nn.functional as F
import triton
from torch.nn.attention import SDPBackend, sdpa_kernel
from triton.testing import do_bench

from bench.order import rotated
from tlx.errors import ConfigRejected
from tlx.kernels import attention

C = attention.Config
CANDIDATES = {
    64: {"bn128": C(), "bn256": C(BN=256), "pipeline": C(STAGES=3, PIPELINE=True),
         "persistent_bn256": C(BN=256, PERSISTENT=True),
         # short causal (0.90x cuDNN at 1024 keys, attention-run8): smaller diagonal blocks, turns
         "persistent_bn128": C(PERSISTENT=True), "persistent_bn64": C(BN=64, PERSISTENT=True),
         "persistent_pingpong": C(PERSISTENT=True, PINGPONG=True),
         # output through its own buffer: the store runs on under the next tile
         "persistent_obuf": C(PERSISTENT=True, O_BUFFER=True), "persistent_bn256_obuf": C(BN=256, PERSISTENT=True,
                                                                                       O_BUFFER=True),
         # three consumers (FlashAttention-3's head-dim-64 tile: 192 x 128, round-robin turns)
         "b192": C(BM=192), "b192_pingpong": C(BM=192, PINGPONG=True), "b192_pipeline": C(BM=192, PIPELINE=True),
         "b192_pipeline_pingpong": C(BM=192, PIPELINE=True, PINGPONG=True),
         "b192_pipeline_pingpong_s3": C(BM=192, STAGES=3, PIPELINE=True, PINGPONG=True),
         "b192_pipeline_pingpong_s3_pin": C(BM=192, STAGES=3, PIPELINE=True, PINGPONG=True, PIN_WAIT=True),
         "b192_persistent_pingpong": C(BM=192, PINGPONG=True, PERSISTENT=True),
         "b192_persistent_pipeline_pingpong": C(BM=192, PIPELINE=True, PINGPONG=True, PERSISTENT=True),
         # P converted before the V wait (a shorter exp -> P V path in the SASS)
         "persistent_bn256_early": C(BN=256, PERSISTENT=True, P_EARLY=True),
         "persistent_bn128_early": C(PERSISTENT=True, P_EARLY=True),
         "persistent_bn256_obuf_early": C(BN=256, PERSISTENT=True, O_BUFFER=True, P_EARLY=True),
         "persistent_bn128_obuf_early": C(PERSISTENT=True, O_BUFFER=True, P_EARLY=True),
         "b192_pipeline_pingpong_s3_pin_early": C(BM=192, STAGES=3, PIPELINE=True, PINGPONG=True, PIN_WAIT=True,
                                                  P_EARLY=True),
         # a K stage refilled once Q K^T has read it (FA3's separate K and V pipelines): two stages suffice
         "b192_pipeline_pingpong_s2_rk": C(BM=192, STAGES=2, PIPELINE=True, PINGPONG=True, RELEASE_K_EARLY=True),
         "b192_pipeline_pingpong_s3_rk": C(BM=192, STAGES=3, PIPELINE=True, PINGPONG=True, RELEASE_K_EARLY=True),
         "b192_persistent_pipeline_pingpong_s2_rk": C(BM=192, STAGES=2, PIPELINE=True, PINGPONG=True, PERSISTENT=True,
                                                      RELEASE_K_EARLY=True),
         "persistent_pipeline_s2_pingpong_rk": C(STAGES=2, PIPELINE=True, PINGPONG=True, PERSISTENT=True,
                                                 RELEASE_K_EARLY=True),
         "persistent_pipeline_s2_pingpong_obuf_rk": C(STAGES=2, PIPELINE=True, PINGPONG=True, PERSISTENT=True,
                                                      O_BUFFER=True, RELEASE_K_EARLY=True),
         "persistent_pipeline_s2_early_rk": C(STAGES=2, PIPELINE=True, PERSISTENT=True, P_EARLY=True,
                                              RELEASE_K_EARLY=True),   # (BN=256 with PIPELINE spills)
         # causal 64-key blocks: the first consumer skips the second half of the diagonal (skip_blocks)
         "persistent_bn64_early": C(BN=64, PERSISTENT=True, P_EARLY=True),
         "persistent_bn64_pingpong_early": C(BN=64, PERSISTENT=True, PINGPONG=True, P_EARLY=True),
         "persistent_bn64_pipeline_s2_pingpong_rk": C(BN=64, STAGES=2, PIPELINE=True, PINGPONG=True, PERSISTENT=True,
                                                      RELEASE_K_EARLY=True),
         "persistent_bn64_pipeline_s3_rk": C(BN=64, STAGES=3, PIPELINE=True, PERSISTENT=True, RELEASE_K_EARLY=True),
         # the 8192-key causal default (three consumers) at shorter lengths, on the balanced table
         "b192_persistent_pipeline_pingpong_s3_bal": C(BM=192, STAGES=3, PIPELINE=True, PINGPONG=True, PERSISTENT=True,
                                                      BALANCED=True),
         "b192_persistent_pipeline_pingpong_s3_bal_pf": C(BM=192, STAGES=3, PIPELINE=True, PINGPONG=True,
                                                         PERSISTENT=True, BALANCED=True, PREFETCH=True),
         "b192_persistent_pipeline_pingpong_s2_rk_bal_pf": C(BM=192, STAGES=2, PIPELINE=True, PINGPONG=True,
                                                            PERSISTENT=True, RELEASE_K_EARLY=True, BALANCED=True,
                                                            PREFETCH=True)},
    128: {"bn128": C(), "pipeline": C(STAGES=3, PIPELINE=True), "pipeline_s2": C(STAGES=2, PIPELINE=True),
          "pipeline_pingpong": C(STAGES=3, PIPELINE=True, PINGPONG=True),
          "pingpong": C(PINGPONG=True), "persistent": C(PERSISTENT=True),
          "persistent_bn64": C(BN=64, PERSISTENT=True), "persistent_pingpong": C(PERSISTENT=True, PINGPONG=True),
          # the P V wait kept after the softmax (PIN_WAIT; ptxas hoisted it, losing the overlap)
          "pipeline_pin": C(STAGES=3, PIPELINE=True, PIN_WAIT=True),
          "pipeline_pingpong_pin": C(STAGES=3, PIPELINE=True, PINGPONG=True, PIN_WAIT=True),
          "persistent_obuf": C(PERSISTENT=True, O_BUFFER=True), "pipeline_s2_obuf": C(STAGES=2, PIPELINE=True,
                                                                                     O_BUFFER=True),
          "persistent_pipeline": C(STAGES=3, PIPELINE=True, PERSISTENT=True),
          "persistent_early": C(PERSISTENT=True, P_EARLY=True),
          "persistent_obuf_early": C(PERSISTENT=True, O_BUFFER=True, P_EARLY=True),
          "pipeline_pingpong_pin_early": C(STAGES=3, PIPELINE=True, PINGPONG=True, PIN_WAIT=True, P_EARLY=True),
          "pipeline_pin_early": C(STAGES=3, PIPELINE=True, PIN_WAIT=True, P_EARLY=True),
          # K released after Q K^T (sweep run 8: -3% to +1% on the grid kernels; the persistent one won at
          # 1024-4096 keys: two stages leave room for two Q buffers and the output buffer)
          "persistent_pipeline_s2_pingpong_obuf_rk": C(STAGES=2, PIPELINE=True, PINGPONG=True, PERSISTENT=True,
                                                       O_BUFFER=True, RELEASE_K_EARLY=True),
          "persistent_pipeline_s2_pingpong_rk": C(STAGES=2, PIPELINE=True, PINGPONG=True, PERSISTENT=True,
                                                  RELEASE_K_EARLY=True),
          "persistent_pipeline_s2_obuf_rk": C(STAGES=2, PIPELINE=True, PERSISTENT=True, O_BUFFER=True,
                                              RELEASE_K_EARLY=True),
          "persistent_pipeline_s2_pingpong_obuf_early_rk": C(STAGES=2, PIPELINE=True, PINGPONG=True, PERSISTENT=True,
                                                             O_BUFFER=True, P_EARLY=True, RELEASE_K_EARLY=True),
          # causal 64-key blocks: the first consumer skips the second half of the diagonal (skip_blocks)
          "persistent_bn64_pipeline_s3_obuf_rk": C(BN=64, STAGES=3, PIPELINE=True, PERSISTENT=True, O_BUFFER=True,
                                                   RELEASE_K_EARLY=True),
          # the persistent default with tiles from a global counter (DYNAMIC), at every length
          "persistent_pipeline_s2_obuf_rk_dyn": C(STAGES=2, PIPELINE=True, PERSISTENT=True, O_BUFFER=True,
                                                  RELEASE_K_EARLY=True, DYNAMIC=True),
          # 192-key blocks in two wgmma parts (pipelined_wide_blocks; FA3 runs 176 at this head dim)
          "wide_rk": C(BN=192, STAGES=2, PIPELINE=True, RELEASE_K_EARLY=True),
          "wide_pingpong_rk": C(BN=192, STAGES=2, PIPELINE=True, PINGPONG=True, RELEASE_K_EARLY=True),
          "wide_pingpong_early_rk": C(BN=192, STAGES=2, PIPELINE=True, PINGPONG=True, P_EARLY=True,
                                      RELEASE_K_EARLY=True),
          "wide_pingpong_pin_rk": C(BN=192, STAGES=2, PIPELINE=True, PINGPONG=True, PIN_WAIT=True,
                                    RELEASE_K_EARLY=True),
          "wide_persistent_rk": C(BN=192, STAGES=2, PIPELINE=True, PERSISTENT=True, RELEASE_K_EARLY=True),
          # P_EARLY took the grid ping-pong build from 0.96-0.99 to 0.97-1.02 of the default (H100, sweep 2026-12-07 run 1);
          # the persistent P_EARLY builds ran 0.93-0.98 of it (runs 2 and 5)
          "wide_persistent_early_rk": C(BN=192, STAGES=2, PIPELINE=True, PERSISTENT=True, P_EARLY=True,
                                        RELEASE_K_EARLY=True),
          "wide_persistent_pingpong_early_rk": C(BN=192, STAGES=2, PIPELINE=True, PINGPONG=True, PERSISTENT=True,
                                                 P_EARLY=True, RELEASE_K_EARLY=True)},
    256: {"bn64": C(BN=64), "bn64_pipeline": C(BN=64, PIPELINE=True), "bn64_pingpong": C(BN=64, PINGPONG=True),
          "bn64_persistent": C(BN=64, PERSISTENT=True),
          "bn64_pingpong_lazy": C(BN=64, PINGPONG=True, LAZY_RESCALE=True),
          "bn64_persistent_lazy": C(BN=64, PERSISTENT=True, LAZY_RESCALE=True),
          # K released after Q K^T: a two-stage PIPELINE loop holds V j-1 and K j and still loads ahead
          # (sweep run 8: without PIPELINE it changed nothing)
          "bn64_pipeline_rk": C(BN=64, PIPELINE=True, RELEASE_K_EARLY=True),
          "bn64_pipeline_pingpong_rk": C(BN=64, PIPELINE=True, PINGPONG=True, RELEASE_K_EARLY=True),
          "bn64_persistent_pipeline_rk": C(BN=64, PIPELINE=True, PERSISTENT=True, RELEASE_K_EARLY=True),
          "bn64_persistent_pipeline_pingpong_rk": C(BN=64, PIPELINE=True, PINGPONG=True, PERSISTENT=True,
                                                    RELEASE_K_EARLY=True),
          "bn64_pipeline_pingpong_early_rk": C(BN=64, PIPELINE=True, PINGPONG=True, P_EARLY=True,
                                               RELEASE_K_EARLY=True)},
}
def with_default(**options):
    """A per-shape candidate: the op's default for (D, S, causal) with `options` set."""
    return lambda D, S, causal: replace(attention.default_config(D, S, causal), **options)


def b192_bal_half(D, S, causal):
    """The D=64 long-causal default's tile (three consumers; BALANCED and HALF_DIAGONAL where causal)."""
    return attention.Config(BM=192, STAGES=3, PIPELINE=True, PINGPONG=True, PERSISTENT=True, BALANCED=causal,
                            HALF_DIAGONAL=causal)


# Per-shape candidates, for every head dim: the op's default for (D, S, causal) and the same with one option
# more (an A/B of that option over the whole default table).
SHAPED = {"default": with_default(),
          "default_lazy": with_default(LAZY_RESCALE=True),
          "default_poly": with_default(POLY_EXP2=True),
          "default_rk": with_default(RELEASE_K_EARLY=True),
          # the P V wait held below the softmax (PIN_WAIT: lost with ping-pong, where the other consumer fills
          # the tensor cores; untimed on the non-ping-pong D=128 default) and P converted early (P_EARLY)
          "default_pin": with_default(PIN_WAIT=True),
          "default_early": with_default(P_EARLY=True),
          "default_pin_early": with_default(PIN_WAIT=True, P_EARLY=True),
          # a deeper K/V ring (Nsight Compute, ncu-run1: D=64 causal 1024 keys, the consumers spend 6% of their
          # samples waiting for K or V to land with the default two stages; sweep run 13: +0.2-0.3%, noise)
          **{f"default_s{n}": with_default(STAGES=n) for n in (3, 4)},
          "default_noskip": with_default(SKIP_MASKED=False),
          # tiles taken from a global counter as programs finish (persistent even where the default is a grid)
          "default_dyn": with_default(PERSISTENT=True, DYNAMIC=True),
          # the default's kernel with tile_of's fixed rounds (no BALANCED table, no DYNAMIC tail)
          "default_static": with_default(BALANCED=False, DYNAMIC=False),
          # the tiles dealt by the host's balanced table (persistent even where the default is a grid)
          "default_bal": with_default(PERSISTENT=True, BALANCED=True),
          # BALANCED with each tile's number read a tile ahead (its first wgmma waited for the table load)
          "default_prefetch": with_default(PREFETCH=True),
          # no warp-group bar.sync before the consumers' stage releases (barrier_arrive's warpgroup_sync)
          "default_lean": with_default(LEAN_SYNC=True),
          "default_lean_pingpong": with_default(LEAN_SYNC=True, PINGPONG=True),
          # a consumer whose rows attend only the first half of its last (diagonal) block runs it at BN // 2 keys
          "default_half": with_default(HALF_DIAGONAL=True),
          # the output through its own buffer, its TMA store running on under the next tile (the D=64 causal
          # 1024-key default stores through Q's buffer and waits: 8% of its consumers' time, attention_trace-run1..3)
          "default_obuf": with_default(O_BUFFER=True),
          # consumers whose rows all lie past the end compute nothing (a 192-row tile's last rows at S = 2^k:
          # 3% of the non-causal and 6% of the causal work at 2048-4096 keys, under 2% from 8192)
          "default_dead": with_default(SKIP_DEAD=True),
          # Q K^T reading Q from registers (loaded once per tile), not shared memory: less shared-memory traffic
          # per Q K^T, where both kernels run at the card's power limit (clock_probe-run1); the D=128 default
          # since sweep run 11, so a candidate for D=64's two-consumer tiles (refused with three consumers and at
          # D=256, which spill with it)
          "default_qreg": with_default(Q_IN_REGS=True),
          # two-CTA clusters sharing each K/V block by TMA multicast (half the L2-to-SM K/V traffic; plain
          # non-causal persistent PIPELINE defaults only, refused elsewhere); the plain non-causal D=128 default
          # since sweep runs 12-14, so default_nocluster is its A/B there
          "default_cluster": with_default(CLUSTER=2),
          "default_nocluster": with_default(CLUSTER=1),
          # the D=64 long-causal default (three consumers, BALANCED, HALF_DIAGONAL) at any length
          "b192_bal_half": b192_bal_half,
          # ... and with SKIP_DEAD: at 1024 keys two of the last tile's three consumers lie past the end, a
          # quarter of the causal work (an eighth non-causal), the likely reason this tile lost 12% there (run 7)
          "b192_bal_half_dead": lambda D, S, causal: replace(b192_bal_half(D, S, causal), SKIP_DEAD=True),
          # the D=64 non-causal default from 2048 keys (two stages, K released early) with SKIP_DEAD, at any length
          "b192_rk_dead": lambda D, S, causal: attention.Config(BM=192, STAGES=2, PIPELINE=True, PINGPONG=True,
                                                                PERSISTENT=True, RELEASE_K_EARLY=True, SKIP_DEAD=True),
          "default_bal_prefetch": with_default(PERSISTENT=True, BALANCED=True, DYNAMIC=False, PREFETCH=True),
          # ... with its last tenth (fifth) taken from the global counter as programs finish
          **{f"default_bal_tail{int(share * 100)}": with_default(PERSISTENT=True, BALANCED=True, DYNAMIC=True,
                                                                  TAIL=share) for share in (0.1, 0.2)},
          **{f"default_dyn_g{g}": with_default(PERSISTENT=True, DYNAMIC=True, HEAD_GROUP=g) for g in (1, 4, 16)}}


def time_row(q, k, v, causal, cands: dict, ref, rounds: int, first: int) -> dict:
    """cuDNN and every candidate on one shape: a checked run each (poisoned output, error against `ref`
    where given), then `rounds` rotated rounds of timings (round r starts `first + r` along); the
    median of each one's rounds is its TFLOP/s."""
    B, H, S, D = q.shape
    row, times = {}, {"cudnn": []}
    for name, cfg in cands.items():
        try:
            out = attention.attention(q, k, v, causal=causal, config=cfg, out=torch.full_like(q, float("nan")))
            torch.cuda.synchronize()
            if ref is not None:
                row[f"{name}_rel_err"] = ((out.float() - ref).norm() / ref.norm()).item()
            times[name] = []
        except Exception as e:   # recorded, never hidden
            row[f"{name}_error"] = f"{type(e).__name__}: {e}"[:200]
    for name in rotated(list(times), rounds, first):
        if name == "cudnn":
            with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
                fn = lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal)  # noqa: E731
                times[name].append(do_bench(fn, return_mode="median"))
        else:
            cfg = cands[name]
            times[name].append(do_bench(lambda: attention.attention(q, k, v, causal=causal, config=cfg),
                                        return_mode="median"))
    for name, ms in times.items():
        row[f"{name}_tflops"] = attention.tflops(B, H, S, D, causal, statistics.median(ms))
    return row


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="bench/results/attention_sweep.json")
    ap.add_argument("--dims", default="64,128,256", help="head dims to sweep, comma-separated")
    ap.add_argument("--lengths", default="2048,8192", help="sequence lengths, comma-separated")
    ap.add_argument("--only", default="", help="time only the candidates whose name matches this regex")
    ap.add_argument("--rounds", type=int, default=1, help="rotated timing rounds per shape (median reported)")
    ap.add_argument("--causal", default="both", choices=["both", "yes", "no"], help="which masks to time")
    ap.add_argument("--check-all", action="store_true", help="check every length against the fp32 reference "
                    "(default: up to 2048 keys)")
    args = ap.parse_args()
    rows = []
    for D in map(int, args.dims.split(",")):
        cands = {n: c for n, c in {**CANDIDATES[D], **SHAPED}.items() if re.search(args.only, n)}
        if not cands:
            raise SystemExit(f"--only {args.only!r} matches no D={D} candidate: {', '.join(CANDIDATES[D])}")
        for S in map(int, args.lengths.split(",")):
            for causal in {"both": (False, True), "yes": (True,), "no": (False,)}[args.causal]:
                B, H = 16384 // S, 2048 // D
                q, k, v = (torch.randn(B, H, S, D, device="cuda", dtype=torch.bfloat16) for _ in range(3))
                ref = F.scaled_dot_product_attention(q.float(), k.float(), v.float(), is_causal=causal) \
                    if S <= 2048 or args.check_all else None
                shaped, rejected = {}, {}
                for n, c in cands.items():
                    try:
                        shaped[n] = c(D, S, causal) if callable(c) else c
                    except ConfigRejected as e:   # an option that does not apply to this shape: recorded
                        rejected[f"{n}_error"] = str(e)[:200]
                row = {"D": D, "S": S, "causal": causal, **rejected,
                       **time_row(q, k, v, causal, shaped, ref, args.rounds, len(rows))}
                row.update({f"{n}_config": repr(shaped[n]) for n in shaped if callable(cands[n])})
                rows.append(row)
                cells = "  ".join(f"{n} refused" if f"{n}_error" in row else f"{n} {row.get(n + '_tflops', 0):6.1f}"
                                  for n in cands)   # the reason is in the JSON row ({name}_error)
                errs = [row[f"{n}_rel_err"] for n in cands if f"{n}_rel_err" in row]
                worst = f"  max rel err {max(errs):.1e}" if errs else ""
                print(f"D={D:3d} S={S:5d} causal={int(causal)}  cudnn {row['cudnn_tflops']:6.1f}  {cells}{worst}",
                      flush=True)
    meta = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "triton": triton.__version__,
            "date": datetime.date.today().isoformat(), "dtype": "bfloat16",
            "timer": f"do_bench median, median of {args.rounds} rotated rounds"}
    with open(args.out, "w") as f:
        json.dump({"meta": meta, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
