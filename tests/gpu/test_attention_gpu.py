"""Attention forward on the GPU against a float32 reference: fresh random data, poisoned outputs."""
import pytest
import torch
import torch.nn.functional as F

from tlx.kernels import attention


def rel_err(out, ref):
    return ((out.float() - ref).norm() / ref.norm()).item()


@pytest.mark.parametrize("pingpong", [False, True], ids=["coop", "pingpong"])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=str)
@pytest.mark.parametrize("D,S,causal,layout,hkv", [
    (64, 1024, False, "bhsd", 8), (64, 2048, True, "bhsd", 2), (128, 1024, True, "bshd", 8),
    (128, 4096, False, "bhsd", 1), (256, 1024, False, "bhsd", 4), (256, 2048, True, "bshd", 8)])
def test_attention_matches_reference(dtype, D, S, causal, layout, hkv, pingpong):
    B, H = 2, 8
    q = torch.randn(B, H, S, D, device="cuda", dtype=dtype)
    k = torch.randn(B, hkv, S, D, device="cuda", dtype=dtype)
    v = torch.randn(B, hkv, S, D, device="cuda", dtype=dtype)
    to_layout = (lambda t: t.transpose(1, 2).contiguous()) if layout == "bshd" else (lambda t: t)
    cfg = attention.Config(BN=64 if D > 128 else 128, PINGPONG=pingpong)
    o, lse = attention.attention(to_layout(q), to_layout(k), to_layout(v), causal=causal, layout=layout,
                                 return_lse=True, config=cfg)
    torch.cuda.synchronize()
    o = o.transpose(1, 2) if layout == "bshd" else o
    kr, vr = k.repeat_interleave(H // hkv, 1).float(), v.repeat_interleave(H // hkv, 1).float()
    ref = F.scaled_dot_product_attention(q.float(), kr, vr, is_causal=causal)
    assert not torch.isnan(o).any()
    assert rel_err(o, ref) <= 1e-2
    scores = (q.float() @ kr.transpose(-1, -2)) / D ** 0.5
    if causal:
        scores = scores.masked_fill(torch.ones(S, S, device="cuda", dtype=torch.bool).triu(1), float("-inf"))
    assert rel_err(lse, torch.logsumexp(scores, -1)) <= 1e-3
