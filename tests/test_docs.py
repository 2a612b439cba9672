"""docs/ops.md lists every declared op and every lowered tl name (and nothing else)."""
import pathlib
import re

import triton.language as tl

from tlx.gluon.tl_shim import OVERRIDES, PASS_THROUGH
from tlx.language import OPS

DOC = (pathlib.Path(__file__).resolve().parents[1] / "docs" / "ops.md").read_text()


def test_every_op_is_documented():
    documented = set(re.findall(r"`tlx\.(\w+)\(", DOC))
    assert set(OPS) <= documented


def test_tl_subset_matches_the_backend_table():
    section = DOC.split("## The `tl` subset")[1]
    documented = set(re.findall(r"`tl\.(\w+)`", section))
    assert documented == {n for n in PASS_THROUGH if hasattr(tl, n)} | set(OVERRIDES)
