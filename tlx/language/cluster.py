"""Hopper cluster ops (launch option ctas_per_cga). The simulator runs them; the Gluon backend lowers them as
inline PTX and a PTX pass (Gluon 3.6 has no builtins; docs/cluster_feasibility.md)."""
from __future__ import annotations

from ._registry import tlx_op


@tlx_op
def cluster_cta_rank(v):
    """This CTA's rank in its cluster."""


@tlx_op
def cluster_size_1d(v):
    """Number of CTAs in the cluster."""


@tlx_op
def cluster_barrier(v):
    """Barrier across all CTAs of the cluster."""


@tlx_op(aliases={"local_allocated_buffer": "bar", "remote_cta_rank": "rank"})
def remote_view(v, bar, rank):
    """A view of `bar` in the shared memory of CTA `rank` of the cluster."""
