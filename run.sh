#!/usr/bin/env bash
# The main job: install tlx, then compile the library kernels for sm_90a and print their compile
# reports; with no GPU, run them on the CPU simulator against a float64 reference; on a GPU, run
# and time them.
set -euo pipefail
cd "$(dirname "$0")"
bash scripts/install.sh
exec python3 -m tlx demo
