"""Every declared tlx op has a simulator rule (cluster ops included: tests/sim/test_cluster.py runs them)."""
import tlx.sim
from tlx.language import OPS
from tlx.sim.rules import RULES, sim_tlx_module


def test_every_op_has_a_sim_rule():
    assert tlx.sim.missing_rules() == [], "ops without a simulator rule"
    assert set(RULES) == set(OPS)
    module = sim_tlx_module()
    for name in OPS:
        assert callable(getattr(module, name)), name
