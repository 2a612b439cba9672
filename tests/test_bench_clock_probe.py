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


class _Samples:
    """A sampler stand-in: a fixed clock and power for every window."""
    def window(self, t0, t1):
        return 1500.0, 690.0, 10


@pytest.fixture
def fake_gpu(monkeypatch):
    """Small CPU tensors, CPU SDPA for cuDNN and for tlx (a stand-in that writes into `out`), and a timer
    that gives tlx half of cuDNN's time; `broken` makes tlx leave its output unwritten."""
    import torch
    import torch.nn.functional as F
    import bench.clock_probe as probe
    real_randn = torch.randn
    monkeypatch.setattr(torch, "randn", lambda *shape, device=None, dtype=None: real_randn(1, 2, 8, shape[-1]))
    state = {"broken": False, "last": None}

    def cudnn(q, k, v, causal):
        state["last"] = "cudnn"
        return F.scaled_dot_product_attention(q, k, v, is_causal=causal)

    def tlx_attention(q, k, v, causal=False, config=None, out=None):
        state["last"] = "tlx"
        result = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
        if out is None:
            return result
        return out if state["broken"] else out.copy_(result)

    def timer(fn, warmup, rep):
        fn()
        return 1.0 if state["last"] == "tlx" else 2.0

    monkeypatch.setattr(probe, "sdpa", lambda backend: cudnn)
    monkeypatch.setattr(probe.attention, "attention", tlx_attention)
    monkeypatch.setattr(probe, "do_bench", timer)
    return probe, state


@pytest.mark.parametrize("S,reference", [(4096, "fp32"), (8192, "cudnn")])
def test_probe_cell_checks_then_times_every_implementation(fake_gpu, S, reference):
    probe, _ = fake_gpu
    row = probe.probe_cell(128, S, False, 0.01, _Samples(), {"Q_IN_REGS": True})
    assert row["reference"] == reference and row["tlx_rel_err"] < 1e-6 and row["variant_rel_err"] < 1e-6
    assert len(row["cudnn_tflops"]) == len(row["tlx_tflops"]) == len(row["variant_tflops"]) == 2
    assert row["ratio"] == pytest.approx(2.0) and row["variant_ratio"] == pytest.approx(2.0)
    assert row["ratio_per_clock"] == pytest.approx(2.0)


def test_probe_cell_refuses_an_unwritten_output(fake_gpu):
    probe, state = fake_gpu
    state["broken"] = True
    with pytest.raises(RuntimeError, match="tlx differs from the fp32 reference by nan"):
        probe.probe_cell(128, 2048, True, 0.01, _Samples(), {})
