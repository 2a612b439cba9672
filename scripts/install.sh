#!/usr/bin/env bash
# Install tlx and its pinned dependencies (pyproject.toml). Without a GPU, take the CPU build of
# torch first: an open range would pull a multi-GB CUDA build.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! python3 -c "import torch" 2>/dev/null; then
    if command -v nvidia-smi >/dev/null 2>&1; then
        python3 -m pip install -q "torch>=2.11,<2.14"
    else
        python3 -m pip install -q torch==2.13.0
    fi
fi
python3 -m pip install -q -e ".[test]"
