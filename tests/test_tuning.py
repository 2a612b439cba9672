"""The GEMM tuner on the simulator: it times every usable configuration once, checks each result,
remembers the winner on disk and never re-measures a known problem."""
import json

import pytest
import torch

import tlx
from tlx.kernels import gemm, tuning


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("TLX_CACHE_DIR", str(tmp_path))
    tuning._MEMORY.clear()
    yield tmp_path
    tuning._MEMORY.clear()


def _fake_timer(monkeypatch, fastest: str, seen: list):
    """Candidates 'take' 1 ms, the one whose kernel name is `fastest` 0.5 ms (the simulator is no clock)."""
    real_tune = tuning.tune

    def tune(*args, **kwargs):
        cands = args[3]
        state = {"i": 0}

        def timer(fn):
            cfg = cands[state["i"]] if state["i"] < len(cands) else None
            state["i"] += 1
            seen.append(cfg)
            return 0.5 if cfg is not None and gemm.Config.name(cfg) == fastest else 1.0
        return real_tune(*args, timer=timer, **kwargs)
    monkeypatch.setattr(tuning, "tune", tune)


def test_tunes_once_then_remembers(cache_dir, monkeypatch, capsys):
    M, N, K = 128, 256, 512
    a, b = torch.randn(M, K, dtype=torch.float16), torch.randn(K, N, dtype=torch.float16)
    cands = gemm.candidates(M, N, K, 2, 2, False, False)
    target = cands[-1].name()                    # not the table's choice: the tuner must find it
    seen = []
    _fake_timer(monkeypatch, target, seen)
    c = gemm.matmul(a, b, "tune", backend="sim", programs=4)
    assert torch.allclose(c.double(), a.double() @ b.double(), rtol=1e-2, atol=1e-1)
    assert len(seen) == len(cands)               # every usable configuration timed once
    err = capsys.readouterr().err
    assert "tlx: tuning gemm 128x256x512" in err and target in json.dumps(json.loads((cache_dir / "tuning.json").read_text()))
    tuning._MEMORY.clear()                       # a new process: read from disk, measure nothing
    seen.clear()
    c2 = gemm.matmul(a, b, "tune", backend="sim", programs=4)
    assert seen == [] and torch.equal(c, c2)
    known = tuning.remembered("gemm", "128x256x512 float16->float16 aNbN bias=False act=None", a.device)
    assert known["name"] == target and known["ms"] == 0.5


def test_env_var_turns_tuning_on(cache_dir, monkeypatch):
    monkeypatch.setenv("TLX_TUNE", "1")
    seen = []
    _fake_timer(monkeypatch, "none", seen)
    a, b = torch.randn(64, 128, dtype=torch.bfloat16), torch.randn(128, 64, dtype=torch.bfloat16)
    gemm.matmul(a, b, backend="sim", programs=2)
    assert len(seen) > 1


def test_candidates_fit_the_problem():
    for cfg in gemm.candidates(4096, 4096, 4096, 2, 4, True, True):
        assert cfg.kernel in gemm.PERSISTENT and cfg.shared_bytes(2, 4) <= gemm.SHARED_LIMIT
    assert any(c.SPLIT_K != 1 for c in gemm.candidates(128, 8192, 8192, 2, 2, True, False))


def test_bad_config_string():
    a = torch.randn(64, 64, dtype=torch.float16)
    with pytest.raises(ValueError, match=r"'config' must be a gemm.Config, None or \"tune\", got 'fast'"):
        gemm.matmul(a, a, "fast", backend="sim")


def test_a_failing_or_wrong_candidate_is_skipped(cache_dir, capsys):
    calls = []

    def run(cfg):
        calls.append(cfg)
        if cfg == "broken":
            raise tlx.ConfigRejected("needs more shared memory")
        out[:] = 1.0 if cfg != "wrong" else 2.0
    out = torch.zeros(4)
    best = tuning.tune("toy", "p", torch.device("cpu"), ["a", "broken", "wrong", "b"], run, lambda: out,
                       fields=lambda c: {"name": c}, timer=lambda fn: {"a": 2.0, "b": 1.0, "wrong": 0.1}[calls[-1]])
    err = capsys.readouterr().err
    assert best == "b"
    assert "broken: skipped (ConfigRejected: needs more shared memory)" in err
    assert "wrong: skipped (result differs" in err
