"""Measure once, remember: the fastest configuration of a library kernel per problem, kept on disk.

`tune(family, problem, candidates, run)` times every candidate `run(cfg)` on the real inputs (after
checking its result against the first candidate that ran), keeps the fastest and stores it in
`$TLX_CACHE_DIR/tuning.json` (default `~/.cache/tlx`) under the GPU's name, triton's version and
tlx's source hash, so a later process (or a new tlx) never trusts a stale winner. Progress goes to
stderr: tuning a shape takes seconds (compiles), which a user should see happening."""
from __future__ import annotations

import functools
import json
import os
import pathlib
import sys
import time
from typing import Callable

_MEMORY: dict[str, dict] = {}


def cache_path() -> pathlib.Path:
    root = os.environ.get("TLX_CACHE_DIR") or os.path.join(os.path.expanduser("~"), ".cache", "tlx")
    return pathlib.Path(root) / "tuning.json"


def _context(device) -> str:
    return _context_of(str(device))


@functools.lru_cache(maxsize=None)
def _context_of(device: str) -> str:
    """GPU name and software versions: looked up once per device (every tuned call asks)."""
    import triton
    import torch

    from ..version import SOURCE_HASH
    name = torch.cuda.get_device_name(device) if device.startswith("cuda") else "cpu-simulator"
    return f"{name}|triton {triton.__version__}|tlx {SOURCE_HASH}"


def _load() -> dict:
    path = cache_path()
    if str(path) not in _MEMORY:
        try:
            _MEMORY[str(path)] = json.loads(path.read_text())
        except (OSError, ValueError):      # no cache yet, or an unreadable one: start afresh
            _MEMORY[str(path)] = {}
    return _MEMORY[str(path)]


def _store(data: dict) -> None:
    path = cache_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps(data, indent=1, sort_keys=True))
    tmp.replace(path)                      # atomic: a concurrent reader sees the old or the new file


def remembered(family: str, problem: str, device) -> dict | None:
    """The stored winner's fields for this problem on this GPU and software, or None."""
    return _load().get(_context(device), {}).get(f"{family}:{problem}")


def tune(family: str, problem: str, device, candidates: list, run: Callable, result: Callable,
         fields: Callable, timer: Callable | None = None, tolerance: float = 1e-2):
    """The fastest candidate (its `fields(cfg)` dict is what gets stored). `run(cfg)` launches it on the
    real inputs; `result()` returns the output tensor; a candidate whose output differs from the
    first one's by more than `tolerance` (relative) or that fails to compile is skipped, with a line
    saying so. `timer(fn)` returns milliseconds (default: triton's do_bench, median)."""
    if timer is None:
        from triton.testing import do_bench

        def timer(fn):
            return do_bench(fn, warmup=5, rep=25, return_mode="median")
    start = time.time()
    print(f"tlx: tuning {family} {problem} over {len(candidates)} configurations (once; remembered in "
          f"{cache_path()})", file=sys.stderr, flush=True)
    reference, timings = None, []

    def label(cfg):
        f = fields(cfg)
        return f.get("name", f)
    for cfg in candidates:
        try:
            run(cfg)
            out = result().double()
        except Exception as e:             # a configuration this problem cannot use: say so, go on
            print(f"  {label(cfg)}: skipped ({type(e).__name__}: {str(e).splitlines()[0][:120]})", file=sys.stderr)
            continue
        if reference is None:
            reference = out.clone()
        else:
            err = ((out - reference).norm() / reference.norm().clamp_min(1e-30)).item()
            if not err <= tolerance:
                print(f"  {label(cfg)}: skipped (result differs from the first configuration's by {err:.1e})",
                      file=sys.stderr)
                continue
        timings.append((timer(lambda: run(cfg)), cfg))
    if not timings:
        raise RuntimeError(f"tlx: no configuration of {family} ran for {problem} (see the lines above)")
    ms, best = min(timings, key=lambda t: t[0])
    record = dict(fields(best), ms=ms)
    data = _load()
    data.setdefault(_context(device), {})[f"{family}:{problem}"] = record
    _store(data)
    print(f"tlx: {family} {problem}: {label(best)}, {ms:.3f} ms (of {len(timings)} timed) after "
          f"{time.time() - start:.1f} s", file=sys.stderr, flush=True)
    return best                            # (the caller runs it: its output then holds the winner's result)
