"""`python -m tlx check FILE` and `python -m tlx demo` as a user runs them."""
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]


def _line_of(path: pathlib.Path, text: str) -> int:
    return next(i for i, line in enumerate(path.read_text().splitlines(), 1) if text in line)


def test_check_reports_the_bug_with_its_line_and_exits_nonzero():
    example = ROOT / "examples" / "checks.py"
    proc = subprocess.run([sys.executable, "-m", "tlx", "check", str(example), "--schedules", "2"],
                          capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert proc.returncode == 1, proc.stderr
    release = _line_of(example, "tlx.barrier_arrive(empty[s])")
    assert f"AsyncDotError [async-dot]: barrier_arrive on empty[0] releases a[0]" in proc.stdout
    assert f"examples/checks.py:{release}" in proc.stdout
    assert ": ok" in proc.stdout   # the WAIT_ALL=True twin passes


def test_usage_without_a_command():
    proc = subprocess.run([sys.executable, "-m", "tlx"], capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert proc.returncode == 2 and "usage: python -m tlx" in proc.stdout
