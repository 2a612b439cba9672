"""Code that only runs on the GPU (tests/gpu, bench/) is never executed by the CPU suite: a missing
import there stays hidden until a device call fails on it (2026-12-06: 21 GPU tests died on an
unimported `replace`). pyflakes reads every module without running it and names undefined names."""
from pathlib import Path

from pyflakes.api import checkPath
from pyflakes.reporter import Reporter
from pyflakes.messages import UndefinedName

ROOT = Path(__file__).resolve().parent.parent
TREES = ["tlx", "tests", "bench", "examples", "scripts"]


class UndefinedNames(Reporter):
    """Keeps pyflakes' undefined-name messages (unused imports and the like are not this test's business)."""

    def __init__(self):
        super().__init__(None, None)
        self.found = []

    def flake(self, message):
        if isinstance(message, UndefinedName):
            self.found.append(str(message))

    def syntaxError(self, filename, msg, lineno, offset, text):
        self.found.append(f"{filename}:{lineno}: syntax error: {msg}")

    def unexpectedError(self, filename, msg):
        self.found.append(f"{filename}: {msg}")


def test_no_module_uses_an_undefined_name():
    reporter = UndefinedNames()
    files = [path for tree in TREES for path in sorted((ROOT / tree).rglob("*.py"))]
    assert len(files) > 50, f"expected the package, tests and benchmarks, found {len(files)} files"
    for path in files:
        checkPath(str(path), reporter)
    assert not reporter.found, "\n".join(reporter.found)
