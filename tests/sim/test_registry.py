"""Every declared tlx op has a simulator rule (cluster ops: an explicit TlxUnsupported)."""
import pytest

import tlx.sim
from tlx.errors import TlxUnsupported
from tlx.language import OPS
from tlx.sim.rules import RULES, sim_tlx_module


def test_every_op_has_a_sim_rule():
    assert tlx.sim.missing_rules() == [], "ops without a simulator rule"
    assert set(RULES) == set(OPS)
    module = sim_tlx_module()
    for name in OPS:
        assert callable(getattr(module, name)), name


@pytest.mark.parametrize("name", ["cluster_cta_rank", "cluster_size_1d", "cluster_barrier"])
def test_cluster_ops_are_unsupported(name):
    with pytest.raises(TlxUnsupported, match=f"tlx.{name} is not supported on the sim backend"):
        RULES[name].fn(None)
