"""bench/attention_profile.py (the launches gpu_session's `ncu` part profiles): its shape argument and
its refusal on a machine without a GPU."""
import pathlib
import subprocess
import sys

import pytest

from bench.attention_profile import parse_shape

ROOT = pathlib.Path(__file__).resolve().parents[1]


def test_shapes_parse_and_bad_ones_are_refused():
    assert parse_shape("64x1024c") == (64, 1024, True) and parse_shape("128x16384") == (128, 16384, False)
    for bad in ("64x1000", "96x1024", "64y1024", "64x1024cc"):
        with pytest.raises(SystemExit, match="--shape must be DxS or DxSc"):
            parse_shape(bad)


def test_without_a_gpu_it_says_so():
    proc = subprocess.run([sys.executable, "bench/attention_profile.py"], capture_output=True, text=True, cwd=ROOT,
                          env={"PYTHONPATH": str(ROOT), "CUDA_VISIBLE_DEVICES": "", "PATH": "/usr/bin:/bin"},
                          timeout=120)
    assert proc.returncode == 1 and "needs a CUDA GPU" in proc.stderr
