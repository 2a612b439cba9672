"""The profiling helpers of bench/: attention_profile.py and gemm_profile.py (the launches gpu_session's `ncu` part
profiles: their shape arguments and their refusal on a machine without a GPU) and ncu_summary.py (its reading
of ncu's SASS page)."""
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


def _refuses_without_a_gpu(*argv: str) -> bool:
    """Whether the script, run with no GPU visible, exits with status 1 and says it needs one."""
    proc = subprocess.run([sys.executable, *argv], capture_output=True, text=True, cwd=ROOT, timeout=120,
                          env={"PYTHONPATH": str(ROOT), "CUDA_VISIBLE_DEVICES": "", "PATH": "/usr/bin:/bin"})
    return proc.returncode == 1 and "needs a CUDA GPU" in proc.stderr


def test_without_a_gpu_it_says_so():
    assert _refuses_without_a_gpu("bench/attention_profile.py")


def _sass_page(path, rows):
    """An ncu SASS source page in the layout `ncu --csv --page source --print-source sass` writes."""
    header = ["Address", "Source", "Warp Stall Sampling (All Samples)", "Warp Stall Sampling (Not-issued Samples)",
              "Instructions Executed", "stall_barrier", "stall_long_sb", "stall_wait", "stall_long_sb (Not Issued)"]
    lines = ['"Kernel Name","attention_fwd_kernel"', ",".join(f'"{h}"' for h in header)]
    lines += [",".join(f'"{v}"' for v in row) for row in rows]
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def test_ncu_summary_shares_and_listing(tmp_path):
    from bench.ncu_summary import hot_listing, read_sass, stall_shares
    page = _sass_page(tmp_path / "sass.csv", [
        ("0x7f0000000020", "  FMNMX R1, R2, R3, !PT", "10", "9", "1,000", "0", "0", "10", "0"),
        ("0x7f0000000000", "  WARPGROUP.DEPBAR.LE gsb0, 0x0", "30", "30", "1,000", "30", "0", "0", "0"),
        ("0x7f0000000040", "  @!P0 BRA 0x7f0000000000", "60", "60", "4,000", "0", "60", "0", "60"),
        ("0x7f0000000060", "  HGMMA.64x128x16.F32.BF16 R24, gdesc[UR4], RZ", "0", "0", "0", "0", "0", "0", "0")])
    kernel, ins = read_sass(page)
    assert kernel == "attention_fwd_kernel" and [i.address - ins[0].address for i in ins] == [0, 0x20, 0x40, 0x60]
    assert stall_shares(ins) == {"long_sb": 0.6, "barrier": 0.3, "wait": 0.1}
    lines = hot_listing(ins, min_share=0.2)
    # the two hot instructions and the DEPBAR (a phase mark); the FMNMX (10%) and the HGMMA that never ran are left out
    assert len(lines) == 2 and "DEPBAR" in lines[0] and "BRA" in lines[1]
    assert "30.0%" in lines[0] and "100.0%" in lines[1] and "long_sb" in lines[1] and "4000" in lines[1]


def test_ncu_summary_refuses_other_files(tmp_path):
    from bench.ncu_summary import read_sass
    bad = tmp_path / "details.csv"
    bad.write_text('"ID","Kernel Name","Metric Name"\n"0","k","Duration"\n')
    with pytest.raises(SystemExit, match="is not an ncu SASS page"):
        read_sass(str(bad))


def test_gemm_profile_shapes_and_no_gpu_refusal():
    from bench.gemm_profile import parse_shape as parse_gemm_shape
    assert parse_gemm_shape("4096x4096x512") == (4096, 4096, 512)
    for bad in ("4096x4096", "8x4096x4096", "4096*4096*4096"):
        with pytest.raises(SystemExit, match="--shape must be MxNxK"):
            parse_gemm_shape(bad)
    assert _refuses_without_a_gpu("bench/gemm_profile.py", "--shape", "256x256x256")
