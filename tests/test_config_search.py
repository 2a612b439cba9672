"""Seeded random configurations on the simulator: each is refused by name (ConfigRejected) or matches a float64
reference. A search like this (2026-12-08, ~560 attention and ~150 GEMM configurations besides these) found
CLUSTER=2 with 256-key blocks failing to compile and rule 8 flagging CLUSTER=2 with PIN_WAIT; it stays as a
guard against the next combination nobody tried by hand."""
import dataclasses
import random

import pytest
import torch
import torch.nn.functional as F

from tlx.errors import ConfigRejected
from tlx.kernels import attention, gemm
from tests.test_attention_features import reference

ATTENTION_FLAGS = ["PINGPONG", "PIPELINE", "PERSISTENT", "O_BUFFER", "PIN_WAIT", "P_EARLY", "LAZY_RESCALE",
                   "POLY_EXP2", "RELEASE_K_EARLY", "DYNAMIC", "BALANCED", "PREFETCH", "LEAN_SYNC", "HALF_DIAGONAL",
                   "Q_IN_REGS", "SKIP_DEAD", "SKIP_MASKED"]


def rel_err(out, ref):
    return ((out.double() - ref).norm() / ref.norm()).item()


def attention_case(rng: random.Random):
    """A default configuration with one to three options flipped (and now and then another ring, block or
    cluster size), on a small problem with random features."""
    D, causal = rng.choice([64, 128, 256]), rng.random() < 0.5
    kw = dataclasses.asdict(attention.default_config(D, rng.choice([1024, 2048, 8192, None]), causal,
                                                     plain=rng.random() < 0.8))
    for flag in rng.sample(ATTENTION_FLAGS, rng.choice([1, 2, 3])):
        kw[flag] = not kw[flag]
    if rng.random() < 0.2:
        kw["STAGES"] = rng.choice([1, 2, 3, 4])
    if rng.random() < 0.15:
        kw["BN"] = rng.choice([64, 128, 192, 256])
    if rng.random() < 0.15:
        kw["BM"] = rng.choice([128, 192])
    if rng.random() < 0.15:
        kw["CLUSTER"] = 3 - kw["CLUSTER"]
    if kw["PERSISTENT"]:
        kw["PROGRAMS"] = rng.choice([0, 2, 3])
    S = 768 if kw["BN"] == 192 else rng.choice([384, 768]) if kw["BM"] == 192 else rng.choice([256, 512])
    H = rng.choice([2, 4])
    features = dict(causal=causal, window=rng.choice([None, None, (100, 30), (64, 0), (200, None)]),
                    softcap=rng.choice([None, None, 20.0]))
    return kw, D, S, H, rng.choice([H, H // 2, 1]), rng.choice(["bhsd", "bhsd", "bshd"]), features


ATTENTION_SEEDS, GEMM_SEEDS = range(96), range(48)


@pytest.mark.parametrize("seed", ATTENTION_SEEDS)
def test_random_attention_config(seed):
    kw, D, S, H, H_kv, layout, features = attention_case(random.Random(seed))
    q = torch.randn(1, H, S, D, dtype=torch.float16)
    k, v = (torch.randn(1, H_kv, S, D, dtype=torch.float16) for _ in range(2))
    to_layout = (lambda t: t.transpose(1, 2).contiguous()) if layout == "bshd" else (lambda t: t)
    out = torch.full_like(to_layout(q), float("nan"))
    try:
        cfg = attention.Config(**kw)
        attention.attention(to_layout(q), to_layout(k), to_layout(v), config=cfg, out=out, layout=layout,
                            backend="sim", **features)
    except ConfigRejected:
        return                                                  # refused by name: fine
    out = out.transpose(1, 2) if layout == "bshd" else out
    ref, _ = reference(q, k, v, **features)
    assert not out.isnan().any() and rel_err(out, ref) <= 1e-2, (kw, D, S, layout, features)


@pytest.mark.parametrize("seed", GEMM_SEEDS)
def test_random_gemm_config(seed):
    """A candidate configuration with scheduling options flipped, on a problem with partial tiles, transposed
    operands, an epilogue or an fp32 output drawn at random."""
    rng = random.Random(seed)
    kw = dataclasses.asdict(rng.choice(gemm.configs()))
    for flag in rng.sample(["PIN_PROLOGUE", "NO_ZERO_FILL", "STREAM_K", "LEAN_SYNC"], rng.choice([0, 1, 2])):
        kw[flag] = not kw[flag]
    if rng.random() < 0.2:
        kw["EPI_SPLIT"] = rng.choice([1, 2, 4])
    if rng.random() < 0.2:
        kw["CLUSTER"] = rng.choice([1, 2])
    M, N, K = rng.choice([64, 200, 384]), rng.choice([64, 136, 520]), rng.choice([64, 136, 320])
    dtype = rng.choice([torch.float16, torch.bfloat16])
    a = torch.randn(K, M, dtype=dtype).T if rng.random() < 0.25 else torch.randn(M, K, dtype=dtype)
    b = torch.randn(N, K, dtype=dtype).T if rng.random() < 0.25 else torch.randn(K, N, dtype=dtype)
    act = rng.choice([None, None, "relu", "gelu", "silu"])
    bias = torch.randn(N, dtype=dtype) if rng.random() < 0.3 else None
    out_dtype = rng.choice([None, None, torch.float32])
    try:
        c = gemm.matmul(a, b, gemm.Config(**kw), bias=bias, activation=act, out_dtype=out_dtype, backend="sim",
                        programs=rng.choice([None, 2, 3, 5]))
    except ConfigRejected:
        return
    ref = a.double() @ b.double() + (0 if bias is None else bias.double())
    ref = {None: lambda x: x, "relu": torch.relu, "gelu": F.gelu, "silu": F.silu}[act](ref)
    assert not c.isnan().any() and rel_err(c, ref) <= 1e-2, (kw, M, N, K, act, out_dtype)


def test_search_runs_most_attention_cases():
    """The search is only worth its time if most draws get past the host's checks and run: count them."""
    ran = 0
    for seed in ATTENTION_SEEDS:
        kw, D, S, H, H_kv, layout, features = attention_case(random.Random(seed))
        q, k = torch.empty(1, H, S, D, dtype=torch.float16), torch.empty(1, H_kv, S, D, dtype=torch.float16)
        try:
            attention.launch_args(q, k, k, torch.empty_like(q), torch.empty(H * S), 0.125, "bhsd", attention.Config(**kw),
                                  attention.Features(**features))
            ran += 1
        except ConfigRejected:
            pass
    assert ran >= len(ATTENTION_SEEDS) // 3, ran
