"""The tl subset kernels use, in one kernel: compiles for sm_90a and matches torch on the simulator."""
import torch
import triton.language as tl

import tlx


@tlx.jit
def _tl_subset(x_ptr, y_ptr, out_ptr, row_ptr, cnt_ptr, t_ptr, n_rows, N: tl.constexpr, BLOCK_R: tl.constexpr):
    tl.static_assert(N % 16 == 0)
    pid = tl.program_id(0)
    rows = pid * BLOCK_R + tl.arange(0, BLOCK_R)
    cols = tl.arange(0, N)
    rows = tl.multiple_of(rows, 1)
    mask = (rows < n_rows)[:, None] & (cols < N)[None, :]
    offs = rows[:, None] * N + cols[None, :]
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)
    y = tl.load(y_ptr + offs, mask=mask, other=1.0).to(tl.float32)
    z = tl.where(x > 0, tl.exp(x) - 1.0, tl.abs(x) * 0.5) + tl.sqrt(y * y + 1.0)
    z = tl.fma(z, 2.0, tl.rsqrt(y * y + 4.0)) + tl.log2(tl.exp2(x * 0.1) + 1.0)
    z = tl.maximum(z, tl.minimum(x, 0.25)) + tl.log(y * y + 1.0)
    tl.store(out_ptr + offs, z.to(tl.float16), mask=mask)
    # the transposed tile, through its own index vectors (an index vector has one layout)
    t_rows = pid * BLOCK_R + tl.arange(0, BLOCK_R)
    t_cols = tl.arange(0, N)
    t = tl.permute(tl.reshape(tl.trans(x), (N, BLOCK_R)), (0, 1))
    tl.store(t_ptr + t_cols[:, None] * n_rows + t_rows[None, :], t, mask=(t_rows < n_rows)[None, :])
    row_max = tl.max(z, axis=1)
    row_sum = tl.sum(z, axis=1)
    row_min = tl.min(z, axis=1)
    tl.store(row_ptr + rows, row_sum + row_max - row_min, mask=rows < n_rows)
    total = tl.sum(tl.where(mask, 1, 0))
    tl.atomic_add(cnt_ptr + tl.zeros((1,), tl.int32), tl.full((1,), 0, tl.int32) + total)
    for i in tl.static_range(2):
        tl.static_assert(i < 2)
    k = 0
    for j in tl.range(0, tl.cdiv(n_rows, BLOCK_R)):
        k += j
    if pid == 1000000:
        tl.device_print("never", k)


def _inputs(n_rows=100, n=64):
    x = torch.randn(n_rows, n, dtype=torch.float32)
    y = torch.randn(n_rows, n, dtype=torch.float16)
    return x, y, torch.full((n_rows, n), float("nan"), dtype=torch.float16), torch.zeros(n_rows), \
        torch.zeros(1, dtype=torch.int32), torch.full((n, n_rows), float("nan"))


def _reference(x, y):
    y = y.double()
    x = x.double()
    z = torch.where(x > 0, torch.exp(x) - 1.0, x.abs() * 0.5) + torch.sqrt(y * y + 1.0)
    z = z * 2.0 + torch.rsqrt(y * y + 4.0) + torch.log2(torch.exp2(x * 0.1) + 1.0)
    z = torch.maximum(z, torch.minimum(x, torch.tensor(0.25, dtype=torch.float64))) + torch.log(y * y + 1.0)
    return z


def test_compiles_for_hopper():
    x, y, out, rows, cnt, t = _inputs()
    r = tlx.compile(_tl_subset, x, y, out, rows, cnt, t, 100, N=64, BLOCK_R=32)
    assert r.stats["spills"] == 0


def test_matches_torch_on_the_simulator():
    x, y, out, rows, cnt, t = _inputs()
    _tl_subset[(4,)](x, y, out, rows, cnt, t, 100, N=64, BLOCK_R=32, backend="sim")
    assert torch.equal(t, x.T)
    z = _reference(x, y)
    assert ((out.double() - z).norm() / z.norm()).item() < 2e-3
    ref_rows = z.sum(1) + z.max(1).values - z.min(1).values
    assert ((rows.double() - ref_rows).norm() / ref_rows.norm()).item() < 1e-4
    assert cnt.item() == 100 * 64
