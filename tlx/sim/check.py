"""`check_file`: run the kernels a file registers for checking, under several schedules.

Registration convention: the file defines a module-level list

    TLX_CHECKS = [
        (kernel, grid, args_factory, kwargs),   # kwargs: constexprs and launch options (num_warps=...)
        ...
    ]

where `args_factory()` returns the positional arguments (fresh tensors) for one launch. Each entry
is simulated with `collect_all=True`; the result lists every protocol error found.
"""
from __future__ import annotations

import importlib.util
import sys
from dataclasses import dataclass, field
from pathlib import Path

from .errors import SimReport
from .executor import launch
from .options import SimOptions


@dataclass
class FileCheckReport:
    path: str
    reports: list[SimReport] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return all(r.ok for r in self.reports)

    def render(self) -> str:
        head = f"tlx sim check {self.path}: {len(self.reports)} kernel launch(es), " + \
            ("no protocol errors" if self.ok else f"{sum(len(r.errors) for r in self.reports)} protocol error(s)")
        return "\n\n".join([head] + [r.render() for r in self.reports])


def _load(path: Path):
    name = f"tlx_check_{abs(hash(str(path.resolve())))}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ValueError(f"tlx.sim.check_file: cannot import {path} (expected a .py file)")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def check_file(path, schedules: int = 4, seed: int = 0, print_report: bool = False) -> FileCheckReport:
    """Simulate every entry of the file's `TLX_CHECKS` and return (optionally print) the report."""
    path = Path(path)
    module = _load(path)
    checks = getattr(module, "TLX_CHECKS", None)
    if not checks:
        raise ValueError(f"tlx.sim.check_file: {path} defines no TLX_CHECKS list "
                         "(entries: (kernel, grid, args_factory, kwargs))")
    options = SimOptions(seed=seed, schedules=schedules, collect_all=True)
    result = FileCheckReport(str(path))
    for entry in checks:
        kernel, grid, args_factory, kwargs = (*entry, {})[:4] if len(entry) == 3 else entry
        kwargs = dict(kwargs)
        num_warps = kwargs.pop("num_warps", 4)
        bound = kernel.bind(tuple(args_factory()), kwargs)
        result.reports.append(launch(kernel, grid, bound, num_warps, options))
    if print_report:
        print(result.render())
    return result


def main(argv: list[str] | None = None) -> int:
    import argparse
    parser = argparse.ArgumentParser(prog="python -m tlx.sim.check", description=__doc__.split("\n")[0])
    parser.add_argument("file")
    parser.add_argument("--schedules", type=int, default=4)
    parser.add_argument("--seed", type=int, default=0)
    ns = parser.parse_args(argv)
    return 0 if check_file(ns.file, ns.schedules, ns.seed, print_report=True).ok else 1


if __name__ == "__main__":
    sys.exit(main())
