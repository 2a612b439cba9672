"""Each Hopper op lowers to the PTX it promises (compile-only, sm_90a)."""
import re

import pytest
import torch
import triton.language as tl

import tlx


@tlx.jit
def _named_and_misc(x_ptr, out_ptr, BAR: tl.constexpr):
    with tlx.async_tasks():
        with tlx.async_task("default"):
            tlx.named_barrier_arrive(BAR, 256)
            tl.store(out_ptr + tlx.thread_id(0), tlx.clock64().to(tl.float32))
            tl.store(out_ptr + 256 + tlx.thread_id(0), tlx.globaltimer().to(tl.float32))
        with tlx.async_task(num_warps=4):
            tlx.named_barrier_wait(BAR, 256)
            tlx.fence("gpu")
            tl.store(out_ptr + 128 + tlx.thread_id(0), 1.0)


def test_named_barriers_thread_id_clock_fence():
    ptx = tlx.compile(_named_and_misc, torch.empty(8), torch.empty(384), BAR=9).asm["ptx"]
    assert re.search(r"bar\.arrive 9, 256", ptx) and re.search(r"bar\.sync 9, 256", ptx)
    assert "%tid.x" in ptx and "%clock64" in ptx and "%globaltimer" in ptx and "fence.acq_rel.gpu" in ptx


def test_named_barrier_ids_used_by_the_region_are_refused():
    with pytest.raises(tlx.TlxCompileError, match=r"tlx.named_barrier_arrive: 'id' must be in \[3, 15\], got 2"):
        tlx.compile(_named_and_misc, torch.empty(8), torch.empty(256), BAR=2)


@tlx.jit
def _cp_async(x_ptr, out_ptr, BLOCK: tl.constexpr):
    buf = tlx.local_alloc((BLOCK, BLOCK), tl.float16, 2)
    offs = tl.arange(0, BLOCK)[:, None] * BLOCK + tl.arange(0, BLOCK)[None, :]
    tlx.async_load(x_ptr + offs, buf[0])
    tlx.async_load_commit_group()
    tlx.async_load_wait_group(0)
    t = tlx.local_load(buf[0])
    tlx.dump_layout(t)
    tl.store(out_ptr + offs, tlx.local_load(tlx.local_trans(buf[0])))


def test_cp_async_views_and_dump_layout(capsys, monkeypatch):
    import triton
    monkeypatch.setattr(triton.knobs.compilation, "always_compile", True)   # dump_layout prints while compiling
    r = tlx.compile(_cp_async, torch.empty(4096, dtype=torch.float16), torch.empty(4096, dtype=torch.float16),
                    BLOCK=64)
    assert r.stats["cp_async"] > 0 and r.stats["spills"] == 0
    assert "tlx.dump_layout:" in capsys.readouterr().out


@tlx.jit
def _device_descriptor(x_ptr, M, N, BM: tl.constexpr, BN: tl.constexpr):
    desc = tl.make_tensor_descriptor(x_ptr, [M, N], [N, 1], [BM, BN])
    buf = tlx.local_alloc((BM, BN), tl.float16, 1)
    bar = tlx.alloc_barriers(1)
    tlx.barrier_expect_bytes(bar[0], BM * BN * 2)
    tlx.async_descriptor_load(desc, buf[0], [0, 0], bar[0])
    tlx.barrier_wait(bar[0], 0)
    tlx.fence_async_shared()
    tlx.async_descriptor_store(desc, buf[0], [BM, 0])
    tlx.async_descriptor_store_wait(0)


def test_device_side_descriptor():
    s = tlx.compile(_device_descriptor, torch.empty(128 * 64, dtype=torch.float16), 128, 64, BM=64, BN=64).stats
    assert s["tma_load"] > 0 and s["tma_store"] > 0 and s["mbarrier_wait"] > 0


@tlx.jit
def _reg_a_dot(x_ptr, out_ptr):
    b = tlx.local_alloc((64, 64), tl.float16, 1)
    offs = tl.arange(0, 64)[:, None] * 64 + tl.arange(0, 64)[None, :]
    a = tl.load(x_ptr + offs)
    tlx.local_store(b[0], a)
    tlx.fence_async_shared()
    acc = tlx.async_dot(a, b[0])
    acc = tlx.async_dot_wait(0, acc)
    c = tl.dot(a, a)
    tl.store(out_ptr + offs, acc + c)


def test_register_operand_wgmma_and_tl_dot():
    s = tlx.compile(_reg_a_dot, torch.empty(4096, dtype=torch.float16), torch.empty(4096)).stats
    assert s["wgmma"] > 0 and s["mma_sync"] > 0 and s["spills"] == 0


@tlx.jit
def _operand_kept_in_registers(x_ptr, out_ptr, N_DOTS: tl.constexpr, LAYOUT: tl.constexpr):
    a_buf = tlx.local_alloc((64, 64), tl.float16, 1)
    b = tlx.local_alloc((64, 64), tl.float16, 1)
    offs = tl.arange(0, 64)[:, None] * 64 + tl.arange(0, 64)[None, :]
    tlx.local_store(a_buf[0], tl.load(x_ptr + offs))
    tlx.local_store(b[0], tl.load(x_ptr + 4096 + offs))
    tlx.fence_async_shared()
    a = tlx.local_load(a_buf[0], layout=LAYOUT)
    acc = tl.zeros((64, 64), tl.float32)
    for _ in range(N_DOTS):                     # A read from registers by every dot
        acc = tlx.async_dot(a, b[0], acc)
        acc = tlx.async_dot_wait(0, acc)
    tl.store(out_ptr + offs, acc)


def test_local_load_into_the_wgmma_a_layout():
    """layout="wgmma_a" loads A straight into wgmma's operand registers: the default (blocked) load needs a
    shared-memory round trip (a conversion's scratch) that this one does not; the result is the same."""
    x = torch.randn(8192, dtype=torch.float16)
    builds = {layout: tlx.compile(_operand_kept_in_registers, x, torch.empty(4096), N_DOTS=3, LAYOUT=layout)
              for layout in (None, "wgmma_a")}
    assert builds["wgmma_a"].stats["wgmma"] > 0 and builds["wgmma_a"].stats["spills"] == 0
    count = {layout: {op: len(re.findall(op, b.asm["ptx"])) for op in (r"st\.shared", r"bar\.sync", "ldmatrix")}
             for layout, b in builds.items()}
    assert count["wgmma_a"]["ldmatrix"] > 0
    assert count["wgmma_a"][r"st\.shared"] < count[None][r"st\.shared"]    # no scratch round trip ...
    assert count["wgmma_a"][r"bar\.sync"] < count[None][r"bar\.sync"]      # ... and no barriers around it
    out = torch.full((4096,), float("nan"))
    _operand_kept_in_registers[(1,)](x, out, N_DOTS=3, LAYOUT="wgmma_a", backend="sim")
    ref = 3 * x[:4096].double().view(64, 64) @ x[4096:].double().view(64, 64)
    assert ((out.view(64, 64).double() - ref).norm() / ref.norm()).item() < 1e-3


@pytest.mark.parametrize("layout,match", [
    ("blocked", r"tlx.local_load: 'layout' must be None \(the compiler's choice\) or \"wgmma_a\", got 'blocked'"),
])
def test_local_load_refuses_unknown_layouts(layout, match):
    with pytest.raises(tlx.TlxCompileError, match=match):
        tlx.compile(_operand_kept_in_registers, torch.empty(8192, dtype=torch.float16), torch.empty(4096),
                    N_DOTS=1, LAYOUT=layout)


@tlx.jit
def _dot_in_flight_across_iterations(a_desc, out_ptr, K, BK: tl.constexpr):
    a = tlx.local_alloc((64, BK), tl.float16, 2)
    b = tlx.local_alloc((BK, 64), tl.float16, 1)
    bar = tlx.alloc_barriers(2)
    tlx.local_store(b[0], tl.zeros((BK, 64), tl.float16) + 1.0)
    tlx.fence_async_shared()
    acc = tl.zeros((64, 64), tl.float32)
    for k in range(tl.cdiv(K, BK)):
        s = k % 2
        acc = tlx.async_dot_wait(1, acc)        # dot k-2 (which read a[s]) retired; dot k-1 may still run
        tlx.barrier_expect_bytes(bar[s], 64 * BK * 2)
        tlx.async_descriptor_load(a_desc, a[s], [0, k * BK], bar[s])
        tlx.barrier_wait(bar[s], (k // 2) & 1)
        acc = tlx.async_dot(a[s], b[0], acc)    # left in flight across the loop edge
    acc = tlx.async_dot_wait(0, acc)
    tl.store(out_ptr + tl.arange(0, 64)[:, None] * 64 + tl.arange(0, 64)[None, :], acc)


def test_async_dot_left_in_flight_across_loop_iterations():
    a = torch.randn(64, 256, dtype=torch.float16)
    desc = tlx.TensorDescriptor.from_tensor(a, [64, 64])
    s = tlx.compile(_dot_in_flight_across_iterations, desc, torch.empty(64 * 64), 256, BK=64).stats
    assert s["wgmma"] > 0 and s["spills"] == 0
    out = torch.full((64 * 64,), float("nan"))
    _dot_in_flight_across_iterations[(1,)](desc, out, 256, BK=64, backend="sim")
    ref = a.double() @ torch.ones(256, 64, dtype=torch.float64)
    assert ((out.view(64, 64).double() - ref).norm() / ref.norm()).item() < 1e-3
