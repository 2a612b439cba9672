#!/usr/bin/env bash
# One device call: GPU tests and the chosen benchmarks, logs and JSON under $OUT.
#   bash bench/gpu_session.sh tests attention sweep gemm overhead
# TESTS_K=EXPR limits the GPU tests to pytest -k EXPR. Runs from the copied tree (PYTHONPATH=.); each part's log is kept even when a part fails.
set -u
OUT=${OUT:-/tmp/tlx-out}
mkdir -p "$OUT"
export PYTHONPATH=.
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu --format=csv > "$OUT/gpu.txt" 2>&1
for part in "$@"; do
  start=$(date +%s)
  case "$part" in
    tests)     python3 -m pytest tests/gpu -q -p no:cacheprovider ${TESTS_K:+-k "$TESTS_K"} > "$OUT/gpu_tests.log" 2>&1 ;;
    attention) python3 bench/attention.py --out "$OUT/attention.json" > "$OUT/attention.log" 2>&1 ;;
    gemm)      python3 bench/gemm.py --out "$OUT/gemm.json" > "$OUT/gemm.log" 2>&1 ;;
    sweep)     python3 bench/attention_sweep.py --out "$OUT/attention_sweep.json" > "$OUT/attention_sweep.log" 2>&1 ;;
    overhead)  python3 bench/launch_overhead.py > "$OUT/launch_overhead.log" 2>&1 ;;
    *) echo "unknown part $part"; exit 2 ;;
  esac
  echo "$part: rc=$? in $(( $(date +%s) - start )) s"
done
