"""Shared test helpers: fp16 GEMM operands and descriptors, and source-line markers."""
import torch

from tlx import TensorDescriptor


def marker_line(path: str, tag: str) -> int:
    """The line of `path` carrying the comment `# BUG:<tag>` (tests never hard-code line numbers)."""
    with open(path) as f:
        hits = [i for i, line in enumerate(f, 1) if line.rstrip().endswith(f"# BUG:{tag}")]
    assert len(hits) == 1, f"marker BUG:{tag} found {len(hits)} times in {path}"
    return hits[0]


def gemm_operands(M, N, K, a_block, b_block, c_block, seed=0):
    g = torch.Generator().manual_seed(seed)
    a = torch.randn(M, K, generator=g).to(torch.float16)
    b = torch.randn(K, N, generator=g).to(torch.float16)
    c = torch.full((M, N), float("nan"), dtype=torch.float16)   # poisoned output
    descs = (TensorDescriptor.from_tensor(a, a_block), TensorDescriptor.from_tensor(b, b_block),
             TensorDescriptor.from_tensor(c, c_block))
    return a, b, c, descs


def rel_err(out: torch.Tensor, ref: torch.Tensor) -> float:
    return ((out.double() - ref).abs().max() / ref.abs().max()).item()


def cdiv(a: int, b: int) -> int:
    return (a + b - 1) // b
