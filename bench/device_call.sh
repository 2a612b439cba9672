#!/usr/bin/env bash
# One device call made of several bench/gpu_session.sh runs, packed into $OUT/session.tgz. The device
# brings back only a handful of files per call (8 of a call's 27 came back on 2026-12-06, the rest were
# "left out"), so every run writes under a scratch folder and one archive carries them all.
#   bash bench/device_call.sh 'GEMM_ARGS="--rounds 4 --only ^$" gemm' 'TLX_GPU_SHARD=1/3 PART_TIMEOUT=280 tests'
# Each argument is one run: leading NAME=VALUE words set its environment (shell quoting applies), the rest
# are gpu_session.sh parts. Run i writes under run<i>/ of the archive; manifest.txt says which is which. The
# archive is rewritten after every run, so a call that runs past its limit still returns the runs it finished.
set -u
OUT=${OUT:-/tmp/tlx-out}
mkdir -p "$OUT"
scratch=$(mktemp -d)
i=0
for run in "$@"; do
  i=$((i + 1))
  eval "set -- $run"
  envs=() parts=()
  for word in "$@"; do
    if [[ ${#parts[@]} -eq 0 && $word =~ ^[A-Za-z_][A-Za-z0-9_]*= ]]; then envs+=("$word"); else parts+=("$word"); fi
  done
  echo "run$i: $run" >> "$scratch/manifest.txt"
  mkdir -p "$scratch/run$i"
  env "${envs[@]}" OUT="$scratch/run$i" bash bench/gpu_session.sh "${parts[@]}" 2>&1 | sed "s/^/run$i /" \
    | tee -a "$scratch/manifest.txt"
  tar czf "$OUT/session.tgz.part" -C "$scratch" . && mv "$OUT/session.tgz.part" "$OUT/session.tgz"   # a call cut
done                                                                        # short still brings the runs done
echo "packed $(find "$scratch" -type f | wc -l) files into $OUT/session.tgz"
rm -rf "$scratch"
