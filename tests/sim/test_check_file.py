"""`tlx.sim.check_file` runs a file's TLX_CHECKS and reports every protocol error it finds."""
import textwrap

import tlx.sim

KERNEL_FILE = textwrap.dedent('''
    import torch
    import triton.language as tl
    import tlx

    @tlx.jit
    def handoff(out_ptr, BUG: tl.constexpr):
        buf = tlx.local_alloc((64,), tl.float32, 1)
        bar = tlx.alloc_barriers(1)
        with tlx.async_tasks():
            with tlx.async_task("default"):
                tlx.local_store(buf[0], tl.full((64,), 1.0, tl.float32))
                tlx.barrier_arrive(bar[0])
            with tlx.async_task(num_warps=4):
                if BUG == 0:
                    tlx.barrier_wait(bar[0], 0)
                tl.store(out_ptr + tl.arange(0, 64), tlx.local_load(buf[0]))

    TLX_CHECKS = [
        (handoff, (1,), lambda: (torch.zeros(64),), {"BUG": 0}),
        (handoff, (1,), lambda: (torch.zeros(64),), {"BUG": 1, "num_warps": 4}),
    ]
''')


def test_check_file_reports_each_launch(tmp_path):
    path = tmp_path / "handoff_kernels.py"
    path.write_text(KERNEL_FILE)
    result = tlx.sim.check_file(path, schedules=3)
    assert [r.ok for r in result.reports] == [True, False]
    errors = result.reports[1].errors
    assert errors and all(isinstance(e, tlx.sim.RaceError) for e in errors)
    text = result.render()
    assert "2 kernel launch(es)" in text and str(path) in text
