"""Every user error of the core names the op, the argument, what was expected and what was given."""
import pytest
import torch
import triton.language as tl

import tlx
from tlx.kernels import gemm


def _compile(kernel, *args, **kw):
    return tlx.compile(kernel, *args, **kw)


def test_tlx_op_outside_jit():
    with pytest.raises(tlx.TlxCompileError, match=r"tlx.local_alloc: called outside a @tlx.jit kernel"):
        tlx.local_alloc((64, 64), tl.float16, 2)
    with pytest.raises(tlx.TlxCompileError, match=r"tlx.async_tasks: called outside"):
        tlx.async_tasks()


@tlx.jit
def _no_default(x_ptr):
    with tlx.async_tasks():
        with tlx.async_task(num_warps=4):
            tl.store(x_ptr, 1)


@tlx.jit
def _two_defaults(x_ptr):
    with tlx.async_tasks():
        with tlx.async_task("default"):
            tl.store(x_ptr, 1)
        with tlx.async_task("default"):
            tl.store(x_ptr, 2)


@pytest.mark.parametrize("kernel,count", [(_no_default, 0), (_two_defaults, 2)])
def test_exactly_one_default_task(kernel, count):
    with pytest.raises(tlx.TlxCompileError, match=rf"exactly one .*default.* is required, got {count}"):
        _compile(kernel, torch.empty(4))


@tlx.jit
def _regs(x_ptr, R: tl.constexpr):
    with tlx.async_tasks():
        with tlx.async_task("default"):
            tl.store(x_ptr, 1)
        with tlx.async_task(num_warps=4, registers=R, replicate=2):
            tl.store(x_ptr + 1, 2)


def test_num_regs_multiple_of_8():
    with pytest.raises(tlx.TlxCompileError, match=r"tlx.async_task: 'num_regs' must be a multiple of 8.*got 100"):
        _compile(_regs, torch.empty(4), R=100)


def test_num_regs_over_budget():
    with pytest.raises(tlx.TlxCompileError, match=r"'num_regs' must be a request that leaves the default task >= 24 registers.*leaving 0 per thread"):
        _compile(_regs, torch.empty(4), R=256, num_warps=8)


@tlx.jit
def _two_tasks(x_ptr):
    with tlx.async_tasks():
        with tlx.async_task("default"):
            tl.store(x_ptr, 1.0)
        with tlx.async_task(num_warps=4):
            tl.store(x_ptr + 1, 2.0)


@pytest.mark.parametrize("backend", ["gluon", "sim"])
@pytest.mark.parametrize("num_warps", [1, 2])
def test_async_tasks_need_whole_warp_groups(num_warps, backend):
    """Gluon refused these with a bare "error encountered during parsing"; the simulator ran them."""
    msg = rf"tlx.async_tasks: 'num_warps' must be a multiple of 4 .*got {num_warps}"
    with pytest.raises(tlx.TlxCompileError, match=msg):
        if backend == "gluon":
            _compile(_two_tasks, torch.empty(4), num_warps=num_warps)
        else:
            _two_tasks[(1,)](torch.empty(4), num_warps=num_warps, backend="sim")


@tlx.jit
def _bad_dot(a_desc, M: tl.constexpr, N: tl.constexpr, K: tl.constexpr):
    a = tlx.local_alloc((M, K), tl.float16, 1)
    b = tlx.local_alloc((K, N), tl.float16, 1)
    acc = tlx.async_dot(a[0], b[0])
    acc = tlx.async_dot_wait(0, acc)


@pytest.mark.parametrize("m,n,k,msg", [(32, 64, 64, "'a' must be M a multiple of 64"),
                                       (64, 512, 64, "'b' must be N a multiple of 8 in \\[8, 256\\]"),
                                       (64, 64, 8, "'a' must be K a multiple of 16")])
def test_async_dot_shapes(m, n, k, msg):
    with pytest.raises(Exception, match=rf"tlx.async_dot: {msg}"):
        _compile(_bad_dot, torch.empty(4, dtype=torch.float16), M=m, N=n, K=k)


@tlx.jit
def _wait_on_buffer(x_ptr):
    bufs = tlx.local_alloc((64, 64), tl.float16, 2)
    tlx.barrier_wait(bufs[0], 0)


@tlx.jit
def _wait_on_array(x_ptr):
    bars = tlx.alloc_barriers(2)
    tlx.barrier_wait(bars, 0)


def test_barrier_ops_on_non_barrier():
    with pytest.raises(Exception, match=r"tlx.barrier_wait: 'bar' must be barrier, got buffer"):
        _compile(_wait_on_buffer, torch.empty(4))
    with pytest.raises(Exception, match=r"tlx.barrier_wait: 'bar' must be barrier, got barriers .*bars\[i\]"):
        _compile(_wait_on_array, torch.empty(4))


@tlx.jit
def _too_much_smem(x_ptr, N: tl.constexpr):
    bufs = tlx.local_alloc((128, 128), tl.float16, N)
    tlx.local_store(bufs[N - 1], tl.load(x_ptr + tl.arange(0, 128)[:, None] * 128 + tl.arange(0, 128)[None, :]))


def test_shared_memory_over_limit_names_required_and_available():
    with pytest.raises(tlx.TlxCompileError, match=r"needs \d+ bytes of shared memory, sm_90a has 232448 available"):
        _compile(_too_much_smem, torch.empty(4, dtype=torch.float16), N=8)


def test_launch_argument_count_and_dtype():
    k = gemm.matmul_ws_kernel
    with pytest.raises(tlx.TlxLaunchError, match=r"matmul_ws_kernel\(a_desc, b_desc, c_desc, M, N, K, BM, BN, BK"):
        k.bind((1, 2), {})
    a = torch.randn(64, 64, dtype=torch.float32)
    with pytest.raises(ValueError, match=r"tlx.matmul: 'a' and 'b' must both be float16 or bfloat16, got "
                                         r"torch.float32"):
        gemm.matmul(a, a)
    with pytest.raises(ValueError, match=r"tlx.matmul: inner sizes must match"):
        gemm.matmul(torch.randn(64, 32, dtype=torch.float16), torch.randn(64, 32, dtype=torch.float16))


@tlx.jit
def _unsupported_tl(x_ptr):
    tl.histogram(tl.arange(0, 16), 4)


def test_unsupported_tl_op_is_named():
    with pytest.raises(Exception, match=r"tl.histogram is not supported on the gluon backend"):
        _compile(_unsupported_tl, torch.empty(4))


@tlx.jit
def _cluster(x_ptr):
    r = tlx.cluster_cta_rank()


@tlx.jit
def _remote_view(x_ptr):
    bars = tlx.alloc_barriers(1)
    tlx.remote_view(bars[0], 1)


def test_remote_view_is_unsupported_on_the_gpu_backend():
    with pytest.raises(Exception, match=r"tlx.remote_view is not supported on the gluon backend.*remote_cta_rank"):
        _compile(_remote_view, torch.empty(4))


@pytest.mark.parametrize("option,value,backend,msg", [
    ("ctas_per_cga", (2, 2, 1), "gluon", r"on the GPU must be \(n, 1, 1\) with 1 <= n <= 8, got \(2, 2, 1\)"),
    ("ctas_per_cga", (16, 1, 1), "gluon", r"on the GPU must be \(n, 1, 1\) with 1 <= n <= 8, got \(16, 1, 1\)"),
    ("maxnreg", 128, "sim", r"'maxnreg' must be None \(each async_task sets its own register count"),
    ("launch_cooperative_grid", True, "sim", r"'launch_cooperative_grid' must be False")])
def test_launch_options_tlx_would_ignore_are_refused(option, value, backend, msg):
    x = torch.zeros(16)
    with pytest.raises(tlx.TlxLaunchError, match=msg):      # refused before anything compiles or runs
        _cluster.run(x, grid=(2,), backend=backend, **{option: value})
    _add_one.run(x, grid=(1,), backend="sim", **{option: (1, 1, 1) if option == "ctas_per_cga" else None})
    assert torch.equal(x, torch.ones(16))                  # the no-op values still launch


@tlx.jit
def _add_one(x_ptr):
    offs = tl.arange(0, 16)
    tl.store(x_ptr + offs, tl.load(x_ptr + offs) + 1.0)


@tlx.jit
def _shape_error_in_task(x_ptr):
    with tlx.async_tasks():
        with tlx.async_task("default"):
            a = tl.zeros((16,), tl.float32)
            b = tl.zeros((32,), tl.float32)
            tl.store(x_ptr + tl.arange(0, 16), a + b)
        with tlx.async_task(num_warps=4):
            pass


def test_error_inside_a_task_names_its_line_and_cause():
    """Triton reports an error inside a task at the task region's call; tlx shows the task's own line and
    the cause, and never chains an error to itself (which hid the cause and looped any walker)."""
    with pytest.raises(tlx.TlxCompileError) as info:
        _compile(_shape_error_in_task, torch.empty(16))
    text = str(info.value)
    assert "tl.store(x_ptr + tl.arange(0, 16), a + b)" in text and "incompatible dimensions" in text
    seen, err = set(), info.value
    while err is not None:
        assert id(err) not in seen
        seen.add(id(err))
        err = err.__cause__
