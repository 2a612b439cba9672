"""The frontend: task splitting, captured values, compile-time ifs, replicas, helpers."""
import pytest
import torch
import triton
import triton.language as tl

import tlx
from tlx.frontend.split import split_kernel


@tlx.jit
def _tasks(x_ptr, n, USE_EXTRA: tl.constexpr, REPS: tl.constexpr):
    pid = tl.program_id(0)
    with tlx.async_tasks():
        with tlx.async_task("default"):
            tl.store(x_ptr + pid, n)
        if USE_EXTRA:
            with tlx.async_task(num_warps=1, replicate=REPS):
                r = tlx.async_task_replica_id()
                tl.store(x_ptr + 64 + r, pid)


def test_split_resolves_constexpr_if_and_replicas():
    s = split_kernel(_tasks.fn, {"USE_EXTRA": True, "REPS": 3})
    assert len(s.tasks) == 4
    assert [sorted(t.params) for t in s.tasks[1:]] == [["pid", "x_ptr"]] * 3
    for rep, task in enumerate(s.tasks[1:]):
        assert f"r = {rep}" in task.text
    assert len(split_kernel(_tasks.fn, {"USE_EXTRA": False, "REPS": 3}).tasks) == 0   # default only: inline


@tlx.jit
def _shadowed(x_ptr, out_ptr, FLAG: tl.constexpr):
    if FLAG:                                   # dead when FLAG is False: `first` is then no outer local
        first = 1
    with tlx.async_tasks():
        with tlx.async_task("default"):
            for i in range(1):
                first = tl.program_id(0) + i  # assigned in the task before it is read
                tl.store(out_ptr + first, tl.load(x_ptr + first) * 2)
        with tlx.async_task(num_warps=4):
            pass


@pytest.mark.parametrize("flag", [False, True])
def test_task_local_name_also_stored_under_dead_constexpr_if(flag):
    """A name stored before the region only in a compile-time-dead branch is not captured (it would
    be unbound); stored in the live branch it is captured and the task's own assignment wins."""
    captured = split_kernel(_shadowed.fn, {"FLAG": flag}).tasks[0].params
    assert ("first" in captured) == flag
    x, out = torch.randn(4), torch.zeros(4)
    _shadowed[(4,)](x, out, FLAG=flag, backend="sim")
    assert torch.equal(out, x * 2)
    tlx.compile(_shadowed, x, out, FLAG=flag)


def test_generated_text_keeps_user_line_numbers():
    import inspect
    lines, first = inspect.getsourcelines(_tasks.fn)
    s = split_kernel(_tasks.fn, {"USE_EXTRA": True, "REPS": 1})
    kernel_lines = s.kernel.text.splitlines()
    store_line = first + next(i for i, l in enumerate(lines) if "tl.store(x_ptr + pid, n)" in l)
    task0 = s.tasks[0].text.splitlines()
    assert "tl.store(x_ptr + pid, n)" in task0[store_line - 1]
    assert kernel_lines[first].strip().startswith("def _tasks__")   # decorator line blanked, def kept


def test_compiles_with_and_without_the_extra_task():
    x = torch.empty(128, dtype=torch.int32)
    with_extra = tlx.compile(_tasks, x, 3, USE_EXTRA=True, REPS=2)
    without = tlx.compile(_tasks, x, 3, USE_EXTRA=False, REPS=2)
    assert "warp_specialize" in with_extra.asm["ttgir"]
    assert "warp_specialize" not in without.asm["ttgir"]


@triton.jit
def _plain_helper(x):
    return tl.maximum(x, 0) * 2


@tlx.jit
def _tlx_helper(x):
    return x + 1


@tlx.jit
def _uses_helpers(x_ptr, y_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)
    a, b = tl.split(tl.reshape(x, (BLOCK // 2, 2)))
    i = 0
    while i < 2:
        i += 1
    tl.store(y_ptr + tl.arange(0, BLOCK // 2), _tlx_helper(_plain_helper(a + b)) + i)


def test_calls_tlx_and_triton_helpers():
    r = tlx.compile(_uses_helpers, torch.empty(64), torch.empty(32), BLOCK=64)
    assert r.stats["spills"] == 0


@tlx.jit
def _bad_task_arg(x_ptr):
    with tlx.async_tasks():
        with tlx.async_task("default"):
            tl.store(x_ptr, 1)
        with tlx.async_task(num_warps=4, num_threads=3):
            tl.store(x_ptr, 2)


def test_unknown_task_argument_is_named():
    with pytest.raises(tlx.TlxCompileError, match=r"unknown argument\(s\) \['num_threads'\]"):
        tlx.compile(_bad_task_arg, torch.empty(4))


def test_kernel_called_directly_explains_launch_syntax():
    with pytest.raises(tlx.TlxLaunchError, match=r"must be launched as _tasks\[grid\]"):
        _tasks(1, 2)


@tlx.jit
def _double(x):
    return x * 2


@tlx.jit
def _apply(x_ptr, out_ptr, FN: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, FN(tl.load(x_ptr + offs)))


def test_jit_function_passed_as_constexpr():
    x, out = torch.randn(64), torch.full((64,), float("nan"))
    _apply[(1,)](x, out, FN=_double, BLOCK=64, backend="sim")
    assert torch.equal(out, x * 2)
    assert tlx.compile(_apply, x, out, FN=_double, BLOCK=64).stats["spills"] == 0
