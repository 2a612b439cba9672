"""The order benchmarks time their candidates in. Whatever is timed first in a round ran up to 13%
fast on the H200 (attention-run6; gemm-run3: the second-timed 1-4% slow), so each round starts
further along the list and every candidate takes every position alike."""
from __future__ import annotations


def rotated(names: list, rounds: int = 1, first: int = 0, spread: bool = False):
    """`names` once per round, round r starting at index first + r (spread: r * len / rounds, so few
    rounds still start far apart)."""
    for r in range(rounds):
        start = (first + (r * len(names) // rounds if spread else r)) % len(names)
        yield from names[start:] + names[:start]
