"""Cluster ops: not modelled by the simulator (nor lowered by Gluon 3.6); each raises TlxUnsupported."""
from __future__ import annotations

from ..errors import TlxUnsupported
from .rules import OpContext, sim_rule


def _unsupported(name: str):
    def rule(ctx: OpContext, **kwargs):
        raise TlxUnsupported(name, "sim", "Hopper cluster ops are not simulated")
    sim_rule(name)(rule)


for _name in ("cluster_cta_rank", "cluster_size_1d", "cluster_barrier", "remote_view"):
    _unsupported(_name)
