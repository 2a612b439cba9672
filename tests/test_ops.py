"""torch.ops.tlx.matmul: registration, fake-tensor shapes, input errors."""
import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensorMode

import tlx.ops


def test_registered_with_fake_implementation():
    with FakeTensorMode():
        a = torch.empty(300, 128, dtype=torch.bfloat16)
        b = torch.empty(128, 72, dtype=torch.bfloat16)
        c = torch.ops.tlx.matmul(a, b, None, "relu", torch.float32)
        assert c.shape == (300, 72) and c.dtype == torch.float32


@pytest.mark.parametrize("a,b,msg", [
    (torch.randn(8, 16, dtype=torch.float16), torch.randn(8, 16, dtype=torch.float16), "inner sizes must match"),
    (torch.randn(8, 16), torch.randn(16, 8), "must both be float16 or bfloat16"),
    (torch.randn(2, 8, 16, dtype=torch.float16), torch.randn(16, 8, dtype=torch.float16), "must be 2-D"),
])
def test_bad_inputs(a, b, msg):
    with pytest.raises(ValueError, match=msg):
        tlx.ops.matmul(a, b)


def test_cpu_tensors_are_refused_with_a_hint():
    a = torch.randn(64, 64, dtype=torch.float16)
    with pytest.raises(ValueError, match=r"'a' must be a CUDA tensor.*backend='sim'"):
        tlx.ops.matmul(a, a)
