"""bench/device_call.sh: several gpu_session.sh runs in one device call, packed into one archive (the device
brings back only a few files per call). Runs here with parts gpu_session.sh refuses, which need no GPU."""
import pathlib
import subprocess
import tarfile

ROOT = pathlib.Path(__file__).resolve().parents[1]


def test_runs_are_packed_with_a_manifest(tmp_path):
    proc = subprocess.run(["bash", "bench/device_call.sh", 'SWEEP_ARGS="--only ^default(_s3)?$" nosuchpart',
                           "PART_TIMEOUT=5 another"], cwd=ROOT, capture_output=True, text=True, timeout=60,
                          env={"OUT": str(tmp_path), "PATH": "/usr/bin:/bin"})
    assert proc.returncode == 0, proc.stderr
    assert "run1 unknown part nosuchpart" in proc.stdout and "run2 unknown part another" in proc.stdout
    with tarfile.open(tmp_path / "session.tgz") as tar:
        names = set(tar.getnames())
        manifest = tar.extractfile("./manifest.txt").read().decode()
    assert {"./run1/gpu.txt", "./run2/gpu.txt", "./manifest.txt"} <= names
    assert manifest.splitlines()[0] == 'run1: SWEEP_ARGS="--only ^default(_s3)?$" nosuchpart'


def test_a_call_cut_short_still_returns_the_runs_it_finished(tmp_path):
    """The device kills a call at its time limit; the archive, rewritten after every run, still holds the
    finished ones. Run 2's python3 is a stand-in that hangs past the limit."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "python3").write_text("#!/bin/sh\nsleep 60\n")
    (bin_dir / "python3").chmod(0o755)
    out = tmp_path / "out"
    proc = subprocess.run(["timeout", "8", "bash", "bench/device_call.sh", "nosuchpart", "PART_TIMEOUT=60 tests"],
                          cwd=ROOT, capture_output=True, text=True, timeout=60,
                          env={"OUT": str(out), "PATH": f"{bin_dir}:/usr/bin:/bin"})
    assert proc.returncode == 124
    with tarfile.open(out / "session.tgz") as tar:
        names = set(tar.getnames())
    assert "./run1/gpu.txt" in names and not any(n.startswith("./run2") for n in names)
