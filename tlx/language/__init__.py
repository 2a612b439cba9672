"""The tlx op surface: declarations (signatures, docs, checks) shared by every backend."""
from . import barriers, cluster, memory, mma, tasks, tma, utility, warp_spec  # noqa: F401  (registers ops)
from ._registry import OPS, OpDecl, ValueView, tlx_op
from .memory import storage_kind

__all__ = ["OPS", "OpDecl", "ValueView", "tlx_op", "storage_kind"]
