"""bench/clock_probe.py's sampler without a GPU: a stand-in `nvidia-smi` on PATH prints the CSV lines the
real one prints in loop mode (and one "[N/A]" line, which the real one prints for a field it cannot read)."""
import os
import stat
import time

import pytest

from bench.clock_probe import Sampler


def test_sampler_reads_nvidia_smi_loop_lines(tmp_path, monkeypatch):
    fake = tmp_path / "nvidia-smi"
    fake.write_text("#!/bin/sh\necho '[N/A], [N/A]'\nwhile true; do echo '1755, 612.25'; echo '1725, 640.75'; "
                    "sleep 0.02; done\n")
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    t0 = time.monotonic()
    sampler = Sampler(period_ms=20)
    try:
        time.sleep(0.5)
        mhz, watts, n = sampler.window(t0, time.monotonic())
        assert n >= 4
        assert 1725 <= mhz <= 1755 and 612.25 <= watts <= 640.75
        with pytest.raises(RuntimeError, match="no nvidia-smi sample"):
            sampler.window(t0 - 10.0, t0 - 5.0)
    finally:
        sampler.close()
