"""Meta TLX's own call forms, so a TLX kernel ports by changing two lines: its keyword names, tokens,
Triton's descriptor methods and `tl.math`, and the options tlx has no lowering for (refused by name).
Each kernel compiles for sm_90a and runs on the simulator against torch."""
import pytest
import torch
import triton.language as tl

import tlx
from tlx import TensorDescriptor


def rel_err(out, ref):
    return ((out.double() - ref.double()).norm() / ref.double().norm()).item()


@tlx.jit
def tlx_keywords_gemm(a_desc, b_desc, c_desc, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
                      S: tl.constexpr):
    """A producer task and a consumer task, every tlx call under TLX's keyword names; C goes out through
    Triton's `desc.store` and the accumulator waits on a `tl.constexpr` pending count."""
    a = tlx.local_alloc((BM, BK), tlx.dtype_of(v=a_desc), S)
    b = tlx.local_alloc((BK, BN), tlx.dtype_of(a_desc), S)
    full = tlx.alloc_barriers(num_barriers=S, arrive_count=1)
    empty = tlx.alloc_barriers(num_barriers=S, arrive_count=1)
    with tlx.async_tasks(exclusive=True):
        with tlx.async_task("default"):
            for k in range(0, tl.cdiv(K, BK)):
                s = k % S
                tlx.barrier_wait(bar=tlx.local_view(local_allocated_buffers=empty, buffer_idx=s), phase=((k // S) & 1) ^ 1)
                bar = full[s]
                tlx.barrier_expect_bytes(bar=bar, size=(BM * BK + BK * BN) * tlx.size_of(tlx.dtype_of(a_desc)))
                tlx.async_descriptor_load(a_desc, result=a[s], offsets=[tl.program_id(0) * BM, k * BK], barrier=bar)
                tlx.async_descriptor_load(b_desc, result=b[s], offsets=[k * BK, 0], barrier=bar)
        with tlx.async_task(num_warps=4, registers=232):
            acc = tl.zeros((BM, BN), tl.float32)
            for k in range(0, tl.cdiv(K, BK)):
                s = k % S
                tlx.barrier_wait(full[s], (k // S) & 1)
                acc = tlx.async_dot(A=a[s], B=b[s], acc=acc)
                acc = tlx.async_dot_wait(tl.constexpr(0), inp=acc)
                tlx.barrier_arrive(empty[s], 1)
            c_desc.store([tl.program_id(0) * BM, 0], acc.to(tlx.dtype_of(c_desc)))


def _gemm_operands(M=128, N=64, K=192, BM=64, BK=64):
    a, b = torch.randn(M, K, dtype=torch.float16), torch.randn(K, N, dtype=torch.float16)
    c = torch.full((M, N), float("nan"), dtype=torch.float16)
    descs = (TensorDescriptor.from_tensor(a, [BM, BK]), TensorDescriptor.from_tensor(b, [BK, N]),
             TensorDescriptor.from_tensor(c, [BM, N]))
    return a, b, c, descs, dict(BM=BM, BN=N, BK=BK, S=2)


def test_tlx_keyword_names_compile_for_hopper():
    _, _, _, descs, meta = _gemm_operands()
    s = tlx.compile(tlx_keywords_gemm, *descs, 192, num_warps=4, **meta).stats
    assert s["wgmma"] > 0 and s["tma_load"] == 2 and s["tma_store"] == 1 and s["spills"] == 0


def test_tlx_keyword_names_match_torch_on_the_simulator():
    a, b, c, descs, meta = _gemm_operands()
    tlx_keywords_gemm[(2,)](*descs, 192, backend="sim", **meta)
    assert rel_err(c, a.double() @ b.double()) < 1e-2


def test_a_tlx_name_and_ours_together_are_refused():
    from tlx.language import OPS
    with pytest.raises(TypeError, match=r"'size' \(TLX's name\) and 'nbytes' name the same argument"):
        OPS["barrier_expect_bytes"].bind(object(), nbytes=16, size=16)


@tlx.jit
def descriptor_methods(x_desc, y_desc, BM: tl.constexpr):
    row = tl.program_id(0) * BM
    x = x_desc.load([row, 0])
    y_desc.store([row, 0], tl.math.exp2(x.to(tl.float32)) - 1.0)


def _descriptor_operands(rows=256, cols=64, BM=64):
    x = torch.randn(rows, cols, dtype=torch.float16)
    y = torch.full_like(x, float("nan"))
    return x, y, (TensorDescriptor.from_tensor(x, [BM, cols]), TensorDescriptor.from_tensor(y, [BM, cols]))


def test_descriptor_methods_and_tl_math_compile_for_hopper():
    _, _, descs = _descriptor_operands()
    s = tlx.compile(descriptor_methods, *descs, BM=64).stats
    assert s["tma_load"] == 1 and s["tma_store"] == 1 and s["mbarrier_wait"] == 1 and s["spills"] == 0


def test_descriptor_methods_and_tl_math_match_torch_on_the_simulator():
    x, y, descs = _descriptor_operands()
    descriptor_methods[(4,)](*descs, BM=64, backend="sim")
    assert rel_err(y, torch.exp2(x.double()) - 1.0) < 1e-2


@tlx.jit
def _descriptor_atomic(x_desc):
    x_desc.atomic_add([0, 0], tl.zeros((64, 64), tl.float16))


@tlx.jit
def _descriptor_short_offsets(x_desc):
    x_desc.load([0])


def test_descriptor_methods_without_a_lowering_are_refused_by_name():
    _, _, (xd, _) = _descriptor_operands()
    with pytest.raises(Exception, match=r"tl.tensor_descriptor.atomic_add is not supported on the gluon backend"):
        tlx.compile(_descriptor_atomic, xd)
    with pytest.raises(Exception, match=r"tl.tensor_descriptor.load: 'offsets' must hold 2 offsets"):
        tlx.compile(_descriptor_short_offsets, xd)


@tlx.jit
def cp_async_tokens(x_ptr, out_ptr, R: tl.constexpr, C: tl.constexpr):
    """cp.async under TLX's token API (tokens collected in lists, passed to the wait and the load)."""
    buf = tlx.local_alloc((R, C), tlx.dtype_of(x_ptr), 1)
    rows, cols = tl.arange(0, R), tl.arange(0, C)
    offs = rows[:, None] * C + cols[None, :]
    token = tlx.async_load(x_ptr + offs, buf[0], other=0, cache_modifier=".cg")
    group = tlx.async_load_commit_group([token])
    tlx.async_load_wait_group(0, tokens=[group])
    x = tlx.local_load(buf[0], token)
    tl.store(out_ptr + offs, x * 2)


def test_cp_async_tokens():
    x = torch.randn(32, 64, dtype=torch.float16)
    out = torch.full_like(x, float("nan"))
    s = tlx.compile(cp_async_tokens, x, out, R=32, C=64).stats
    assert s["cp_async"] > 0 and s["spills"] == 0
    cp_async_tokens[(1,)](x, out, R=32, C=64, backend="sim")
    assert torch.equal(out, x * 2)


@tlx.jit
def shared_index_vector(a_ptr, b_ptr, a_out, b_out, K_VALID, M: tl.constexpr, K: tl.constexpr, N: tl.constexpr):
    """One `offs_k` indexes the columns of an [M, K] tile and the rows of a [K, N] one, pointers and masks
    alike (Triton's matmul tutorial does this): two layouts for one Auto vector, which Gluon cannot
    resolve by itself (the lowering's last layout policy gives the vector its own layout)."""
    offs_m, offs_k, offs_n = tl.arange(0, M), tl.arange(0, K), tl.arange(0, N)
    a_buf = tlx.local_alloc((M, K), tlx.dtype_of(a_ptr), 1)
    b_buf = tlx.local_alloc((K, N), tlx.dtype_of(b_ptr), 1)
    tlx.async_load(a_ptr + offs_m[:, None] * K + offs_k[None, :], a_buf[0], mask=offs_k[None, :] < K_VALID)
    tlx.async_load(b_ptr + offs_k[:, None] * N + offs_n[None, :], b_buf[0], mask=offs_k[:, None] < K_VALID)
    tlx.async_load_commit_group()
    tlx.async_load_wait_group(0)
    tl.store(a_out + offs_m[:, None] * K + offs_k[None, :], tlx.local_load(a_buf[0]) + 1.0)
    tl.store(b_out + offs_k[:, None] * N + offs_n[None, :], tlx.local_load(b_buf[0]) * 2.0)


def test_one_index_vector_for_two_tile_layouts():
    a, b = torch.randn(32, 64, dtype=torch.float16), torch.randn(64, 128, dtype=torch.float16)
    a_out, b_out = torch.full_like(a, float("nan")), torch.full_like(b, float("nan"))
    args = (a, b, a_out, b_out, 48)
    s = tlx.compile(shared_index_vector, *args, M=32, K=64, N=128).stats
    assert s["cp_async"] > 0
    policy = {k: v for k, v in shared_index_vector.lowered.items() if k[0] == "gluon-policy"}
    assert list(policy.values()) == [2], policy            # the case the last policy exists for
    shared_index_vector[(1,)](*args, M=32, K=64, N=128, backend="sim")
    keep = torch.arange(64) < 48
    assert torch.equal(a_out, torch.where(keep[None, :], a + 1.0, torch.ones_like(a)))
    assert torch.equal(b_out, torch.where(keep[:, None], b * 2.0, torch.zeros_like(b)))


@tlx.jit
def _region_option(x_ptr):
    with tlx.async_tasks(no_ending_cluster_sync=True):
        with tlx.async_task("default"):
            tl.store(x_ptr, 1.0)
        with tlx.async_task(num_warps=4):
            tl.store(x_ptr + 1, 2.0)


def test_async_tasks_refuses_options_it_would_ignore():
    with pytest.raises(Exception, match=r"tlx.async_tasks: 'no_ending_cluster_sync' is not supported"):
        tlx.compile(_region_option, torch.zeros(2))


@tlx.jit
def _dot_option(a_desc, OPTION: tl.constexpr):
    a = tlx.local_alloc((64, 64), tl.float16, 1)
    if OPTION == 0:
        acc = tlx.async_dot(a[0], a[0], two_ctas=True)
    else:
        acc = tlx.async_dot(a[0], a[0], input_precision="ieee")


@pytest.mark.parametrize("option,message", [(0, r"tlx.async_dot: 'two_ctas' must be False"),
                                            (1, r"tlx.async_dot: 'input_precision' must be None or \"tf32\"")])
def test_tlx_options_without_a_hopper_lowering_are_refused_by_name(option, message):
    desc = TensorDescriptor.from_tensor(torch.zeros(64, 64, dtype=torch.float16), [64, 64])
    with pytest.raises(Exception, match=message):
        tlx.compile(_dot_option, desc, OPTION=option)
    with pytest.raises(Exception, match=message):
        _dot_option[(1,)](desc, OPTION=option, backend="sim")


@tlx.jit
def _store_reduce(a_desc):
    a = tlx.local_alloc((64, 64), tl.float16, 1)
    tlx.async_descriptor_store(a_desc, a[0], [0, 0], store_reduce="add")


def test_reducing_tma_store_is_refused_by_name():
    desc = TensorDescriptor.from_tensor(torch.zeros(64, 64, dtype=torch.float16), [64, 64])
    with pytest.raises(Exception, match=r"tlx.async_descriptor_store: 'store_reduce' must be \"\""):
        tlx.compile(_store_reduce, desc)


@tlx.jit
def _predicated_arrive(x_ptr, ARRIVE: tl.constexpr):
    bars = tlx.alloc_barriers(1, arrive_count=1)
    tlx.barrier_arrive(bars[0], pred=tl.program_id(0) < ARRIVE)
    tlx.barrier_wait(bars[0], 0)
    tlx.fence("sys")
    tl.store(x_ptr + tl.program_id(0), 1.0)


def test_predicated_arrive_and_system_fence():
    ptx = tlx.compile(_predicated_arrive, torch.zeros(1), ARRIVE=1).asm["ptx"]
    assert "fence.acq_rel.sys" in ptx
    x = torch.zeros(1)
    _predicated_arrive[(1,)](x, ARRIVE=1, backend="sim")
    assert x.item() == 1.0
    with pytest.raises(Exception, match="deadlock"):      # a false pred arrives nowhere: the wait never ends
        _predicated_arrive[(1,)](torch.zeros(1), ARRIVE=0, backend="sim")
