"""The fused activations on the GPU (ex2.approx and the fast reciprocal): per element against float64."""
import numpy as np
import pytest
import torch
import triton

from tests.test_activations import _apply, _exact


@pytest.mark.parametrize("act", ["gelu", "silu"])
def test_activation_matches_float64_on_gpu(act):
    x = torch.cat([torch.linspace(-12, 12, 30001), (torch.randn(100000) * 4).clamp(-12, 12)]).float().cuda()
    out = torch.full_like(x, float("nan"))
    _apply[(triton.cdiv(x.numel(), 1024),)](x, out, x.numel(), ACTIVATION=act, BLOCK=1024)
    torch.cuda.synchronize()
    ref = _exact(act, x.double().cpu().numpy())
    rel = np.abs(out.double().cpu().numpy() - ref) / np.maximum(np.abs(ref), 1e-300)
    assert np.isfinite(out.cpu().numpy()).all() and rel.max() < 1e-4, (rel.max(), x[int(rel.argmax())].item())
