#!/usr/bin/env bash
# The pending device call, kept here so a session makes it with one short command whichever card comes:
#   bash bench/next_call.sh            # on the device machine, from the copied tree
# On an H200 it times what issues 4 and 5 are judged by (both tables, with the current code), then the
# CLUSTER=2 attention sweep (last: device_call.sh returns the runs finished when a call is cut short, so a
# limit below 540 s still brings the tables); on any other card, the D=64 Q_IN_REGS sweep (the H100 ran issue 5's
# table and the whole GPU suite with the current defaults on 2026-12-08). About 540 s on an H200. Edit it when the plan changes
# (BENCHMARKS.md's standing summary says why each run is next).
set -u
card=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
echo "card: $card"
cluster_sweep='--causal no --only ^(default|default_cluster)$ --rounds 3 --check-all'
if [[ $card == *H200* ]]; then
  bash bench/device_call.sh \
    'ATTENTION_ARGS="--no-features --variants tlx --rounds 3 --graph" PART_TIMEOUT=300 attention' \
    'GEMM_ARGS="--rounds 4 --only ^$" PART_TIMEOUT=110 gemm' \
    "SWEEP_ARGS=\"--dims 128 --lengths 4096,8192,16384 $cluster_sweep\" PART_TIMEOUT=110 sweep"
else
  # issue 5's table and the whole GPU suite ran on an H100 on 2026-12-08; what an H100 can still answer is
  # whether Q_IN_REGS helps D=64's two-consumer tiles (the defaults at 1024 keys, furthest from 1.1x; every
  # wgmma then reads A from registers: 40 of 40 non-causal and 56 of 56 causal, against 32 and 36; no spills)
  echo "not an H200: the D=64 Q_IN_REGS sweep only"
  bash bench/device_call.sh \
    'SWEEP_ARGS="--dims 64 --lengths 1024 --causal both --only ^(default|default_qreg)$ --rounds 7 --check-all" PART_TIMEOUT=200 sweep'
fi
