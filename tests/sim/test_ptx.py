"""The simulator runs known one-instruction inline PTX and refuses other asm by name."""
import pytest
import torch
import triton.language as tl

import tlx


@tlx.jit
def _apply(x_ptr, out_ptr, n, ASM: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n)
    y = tl.inline_asm_elementwise(ASM, "=r,r", [x], dtype=tl.float32, is_pure=True, pack=1)
    tl.store(out_ptr + offs, y, mask=offs < n)


@pytest.mark.parametrize("asm,ref", [("tanh.approx.f32 $0, $1;", torch.tanh), ("ex2.approx.ftz.f32 $0, $1;", torch.exp2),
                                     ("rcp.approx.f32 $0, $1;", torch.reciprocal)])
def test_known_instructions(asm, ref):
    x, out = torch.randn(100), torch.full((100,), float("nan"))
    _apply[(1,)](x, out, 100, ASM=asm, BLOCK=128, backend="sim")
    torch.testing.assert_close(out, ref(x), rtol=1e-6, atol=1e-6)
    assert asm.split()[0] in tlx.compile(_apply, x, out, 100, ASM=asm, BLOCK=128).asm["ptx"]


def test_unknown_asm_is_refused_by_name():
    x, out = torch.randn(8), torch.zeros(8)
    with pytest.raises(Exception, match=r"simulator runs only `op \$0, \$1;`.*'mov.b32 \$0, \$1;'"):
        _apply[(1,)](x, out, 8, ASM="mov.b32 $0, $1;", BLOCK=8, backend="sim")
