"""Split the GPU suite over several device calls: TLX_GPU_SHARD=i/n keeps every n-th test from the i-th
(1-based), so each shard draws from every file and the shards take about the same time (the whole
suite runs longer than one call may)."""
from __future__ import annotations


def parse_shard(spec: str) -> tuple[int, int]:
    """'i/n' -> (i, n) with 1 <= i <= n; anything else raises a ValueError naming TLX_GPU_SHARD."""
    try:
        i, n = (int(part) for part in spec.split("/"))
    except ValueError:
        raise ValueError(f"TLX_GPU_SHARD must be 'i/n' (e.g. 1/2), got {spec!r}") from None
    if not 1 <= i <= n:
        raise ValueError(f"TLX_GPU_SHARD must be 'i/n' with 1 <= i <= n, got {spec!r}")
    return i, n


def in_shard(index: int, shard: tuple[int, int]) -> bool:
    i, n = shard
    return index % n == i - 1
