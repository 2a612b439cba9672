#!/usr/bin/env bash
# The tests: install tlx with its test dependencies, then run the CPU suite (GPU tests skip
# themselves where there is no GPU; on the H200 they run).
set -euo pipefail
cd "$(dirname "$0")"
bash scripts/install.sh
exec python3 -m pytest tests "$@"
