#!/usr/bin/env bash
# One device call: GPU tests and the chosen benchmarks, logs and JSON under $OUT. Several runs in one call
# (each with its own settings): bench/device_call.sh, which packs them into one archive.
#   bash bench/gpu_session.sh tests attention sweep gemm trace atrace overhead placement cublas ncu clocks
# TESTS_K=EXPR limits the GPU tests to pytest -k EXPR (and TLX_GPU_SHARD=i/n to every n-th of them, tests/gpu/sharding.py);
# TESTS_JOBS=N runs them in N pytest-xdist workers sharing the GPU (the suite is compile-bound: one process ran
# about 150 tests in 210 s on an H100; eight workers ran all 454 in 124 s, but one test's fp32 reference then
# ran out of the card's 80 GB; four ran all 454 in 253 s, so use 4; 465 tests
# needed more than 280 s with four on 2026-12-08: give the part 340 s); SWEEP_ARGS, ATTENTION_ARGS, ATRACE_ARGS, GEMM_ARGS and CLOCKS_ARGS pass
# options to attention_sweep.py, attention.py, attention_trace.py, gemm.py and clock_probe.py; `ncu` profiles the second launch of the kernel
# whose name matches NCU_KERNEL (default: the tlx attention kernel) in bench/${PROFILE:-attention}_profile.py ${PROFILE_ARGS}
# (PROFILE=gemm: bench/gemm_profile.py, with NCU_KERNEL=matmul or nvjet) into $OUT/ncu.ncu-rep,
# its csv pages and bench/ncu_summary.py's reading of them (first run 2026-12-06, ncu-run1); each part is killed after PART_TIMEOUT seconds
# (defaults per part below: a hung kernel must not eat the whole device call). Runs from the copied tree (PYTHONPATH=.); each part's log is kept even when a part fails.
set -u
OUT=${OUT:-/tmp/tlx-out}
mkdir -p "$OUT"
export PYTHONPATH=.
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu --format=csv > "$OUT/gpu.txt" 2>&1
for part in "$@"; do
  start=$(date +%s)
  case "$part" in
    tests)     timeout "${PART_TIMEOUT:-450}" python3 -u -m pytest tests/gpu -q -p no:cacheprovider ${TESTS_K:+-k "$TESTS_K"} ${TESTS_JOBS:+-n "$TESTS_JOBS"} \
                 > "$OUT/gpu_tests.log" 2>&1 ;;
    attention) timeout "${PART_TIMEOUT:-300}" python3 -u bench/attention.py --out "$OUT/attention.json" ${ATTENTION_ARGS:-} \
                 > "$OUT/attention.log" 2>&1 ;;
    gemm)      timeout "${PART_TIMEOUT:-360}" python3 -u bench/gemm.py --out "$OUT/gemm.json" ${GEMM_ARGS:-} \
                 > "$OUT/gemm.log" 2>&1 ;;
    sweep)     timeout "${PART_TIMEOUT:-300}" python3 -u bench/attention_sweep.py --out "$OUT/attention_sweep.json" ${SWEEP_ARGS:-} \
                 > "$OUT/attention_sweep.log" 2>&1 ;;
    trace)     timeout "${PART_TIMEOUT:-120}" python3 -u bench/gemm_trace.py --out "$OUT/gemm_trace" > "$OUT/gemm_trace.log" 2>&1 ;;
    atrace)    timeout "${PART_TIMEOUT:-120}" python3 -u bench/attention_trace.py --out "$OUT/attention_trace" ${ATRACE_ARGS:-} \
                 > "$OUT/attention_trace.log" 2>&1 ;;
    placement) timeout "${PART_TIMEOUT:-60}" python3 -u bench/gemm_placement.py > "$OUT/gemm_placement.log" 2>&1 ;;
    cublas)    timeout "${PART_TIMEOUT:-90}" python3 -u bench/cublas_kernels.py --out "$OUT/cublas_kernels.json" > "$OUT/cublas_kernels.log" 2>&1 ;;
    clocks)    timeout "${PART_TIMEOUT:-120}" python3 -u bench/clock_probe.py --out "$OUT/clock_probe.json" ${CLOCKS_ARGS:-} \
                 > "$OUT/clock_probe.log" 2>&1 ;;
    overhead)  timeout "${PART_TIMEOUT:-60}" python3 -u bench/launch_overhead.py > "$OUT/launch_overhead.log" 2>&1 ;;
    ncu)       timeout "${PART_TIMEOUT:-240}" ncu --clock-control none --kernel-name "regex:${NCU_KERNEL:-attention}" \
                 --launch-skip 1 --launch-count 1 --section SpeedOfLight --section ComputeWorkloadAnalysis \
                 --section WarpStateStats --section SchedulerStats --section InstructionStats --section SourceCounters \
                 -f -o "$OUT/ncu" python3 -u bench/${PROFILE:-attention}_profile.py ${PROFILE_ARGS:-} > "$OUT/ncu.log" 2>&1
               # the report (open it in Nsight Compute) read three ways: section tables, every metric, stalls per SASS line
               for page in details raw; do ncu --import "$OUT/ncu.ncu-rep" --csv --page $page > "$OUT/ncu_$page.csv" 2>> "$OUT/ncu.log"; done
               ncu --import "$OUT/ncu.ncu-rep" --csv --page source --print-source sass > "$OUT/ncu_sass.csv" 2>> "$OUT/ncu.log"
               python3 bench/ncu_summary.py "$OUT/ncu_sass.csv" --raw "$OUT/ncu_raw.csv" > "$OUT/ncu_summary.txt" 2>> "$OUT/ncu.log" ;;
    *) echo "unknown part $part"; exit 2 ;;
  esac
  echo "$part: rc=$? in $(( $(date +%s) - start )) s"
done
