"""bench/attention.py's timing loop without a GPU: the implementations and timers are stand-ins, so what is
checked is the bookkeeping (one checked run per implementation into a poisoned output, `--rounds` rotated so
every implementation takes every position, medians of the rounds, errors recorded, never hidden)."""
import json
import statistics

import pytest
import torch
import torch.nn.functional as F

import bench.attention as bench_attention


@pytest.fixture
def fake_gpu(monkeypatch):
    """Small CPU tensors for every cell, a timer that returns the next of a fixed sequence of times per
    implementation, and a log of the order in which implementations were timed."""
    real_randn = torch.randn
    monkeypatch.setattr(torch, "randn", lambda *shape, device=None, dtype=None: real_randn(1, 2, 8, shape[-1]))
    monkeypatch.setattr(torch.cuda, "synchronize", lambda: None)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda: "stand-in")
    log = {"timed": [], "checked": []}

    def implementation(name, fails=False):
        def run(q, k, v, causal, out=None):
            log["last"] = name
            if fails:
                raise RuntimeError(f"{name} refused")
            if out is not None:
                log["checked"].append((name, bool(torch.isnan(out).all())))
            result = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
            return out.copy_(result) if out is not None else result
        return run

    def timer(fn, return_mode, rep=100):
        assert return_mode == "median"
        log.setdefault("reps", set()).add(rep)
        fn()
        name = log["last"]
        log["timed"].append(name)
        return {"tlx": 1.0, "cudnn": 2.0}.get(name, 4.0) * (1 + 0.1 * (len(log["timed"]) % 3))

    monkeypatch.setattr(bench_attention, "tlx_variant", lambda variant: implementation("tlx"))
    monkeypatch.setattr(bench_attention, "sdpa", lambda backend: implementation(
        "flash" if backend == bench_attention.SDPBackend.FLASH_ATTENTION else "cudnn",
        fails=backend == bench_attention.SDPBackend.FLASH_ATTENTION))
    monkeypatch.setattr(bench_attention, "do_bench", timer)
    monkeypatch.setattr(bench_attention, "do_bench_cudagraph", timer)
    return log


def _run(monkeypatch, tmp_path, *argv):
    out = tmp_path / "attention.json"
    monkeypatch.setattr("sys.argv", ["attention.py", "--out", str(out), "--no-features", "--variants", "tlx",
                                     "--dims", "64", *argv])
    bench_attention.main()
    return json.loads(out.read_text())


def test_rounds_rotate_and_report_medians(fake_gpu, monkeypatch, tmp_path):
    result = _run(monkeypatch, tmp_path, "--rounds", "3")
    rows = result["rows"]
    assert result["meta"]["rounds"] == 3 and len(rows) == 10            # D=64: five lengths, causal and not
    # every checked run wrote into an all-NaN output, once per cell for the op
    assert fake_gpu["checked"] == [("tlx", True)] * 10
    # flash failed its checked run: recorded on every row, never timed
    assert all(r["flash_error"] == "RuntimeError: flash refused" and "flash_tflops" not in r for r in rows)
    assert "flash" not in fake_gpu["timed"] and len(fake_gpu["timed"]) == 10 * 3 * 2
    # each cell's three rounds start at different implementations, so each takes both positions
    for cell in range(10):
        order = fake_gpu["timed"][cell * 6:(cell + 1) * 6]
        assert sorted(order) == ["cudnn"] * 3 + ["tlx"] * 3 and {order[0], order[2], order[4]} == {"tlx", "cudnn"}
    for r in rows:
        assert len(r["tlx_tflops_rounds"]) == 3 and r["tlx_tflops"] == pytest.approx(
            statistics.median(r["tlx_tflops_rounds"]))
        assert r["ratio_cudnn"] == pytest.approx(r["tlx_tflops"] / r["cudnn_tflops"])
        assert 1.5 < r["ratio_cudnn"] < 2.5                              # the stand-in's tlx takes half the time
        assert r["tlx_rel_err"] < 1e-6 if r["S"] <= 4096 else "tlx_rel_err" not in r   # fp32 reference to 4096


def test_graph_columns(fake_gpu, monkeypatch, tmp_path):
    result = _run(monkeypatch, tmp_path, "--graph")
    assert all("tlx_graph_tflops" in r and "cudnn_graph_tflops" in r and "graph_ratio_cudnn" in r
               for r in result["rows"])
    assert "geomean_graph_ratio_cudnn" in result["meta"] and "tlx_tflops_rounds" not in result["rows"][0]


def test_rep_reaches_both_timers(fake_gpu, monkeypatch, tmp_path):
    result = _run(monkeypatch, tmp_path, "--graph", "--rep", "500")
    assert fake_gpu["reps"] == {500} and result["meta"]["rep_ms"] == 500
    with pytest.raises(SystemExit, match="--rep must be at least 10 ms"):
        _run(monkeypatch, tmp_path, "--rep", "5")


def test_rounds_must_be_positive(fake_gpu, monkeypatch, tmp_path):
    with pytest.raises(SystemExit, match="--rounds must be at least 1"):
        _run(monkeypatch, tmp_path, "--rounds", "0")
