"""The simulator's rule table and the `tlx` module that kernels see when they run on it.

A rule is `rule(ctx, <the op's parameters by name>)`. Every call first binds the user's arguments
to the op's declared signature and runs the declaration's checks with `SimView`, so both backends
reject the same programs with the same words.
"""
from __future__ import annotations

import types
from dataclasses import dataclass
from typing import Callable

import triton.language as tl

from ..errors import TlxCompileError
from ..language import OPS
from .errors import Site
from .scheduler import Task, current_task
from .sites import user_location
from .view import VIEW


@dataclass(frozen=True)
class SimRule:
    fn: Callable
    yields: bool       # a scheduling point: another task may run before this op


RULES: dict[str, SimRule] = {}


def sim_rule(name: str, *, yields: bool = False):
    """Attach the decorated function as the simulator's rule for the declared op `name`."""
    assert name in OPS, f"tlx.sim: no declared op named {name!r}"

    def register(fn):
        assert name not in RULES, f"tlx.sim: two rules for {name!r}"
        RULES[name] = SimRule(fn, yields)
        return fn
    return register


class OpContext:
    """What a rule sees: the calling task, its program instance and the op's user site."""

    def __init__(self, task: Task, op: str):
        self.task, self.op = task, op
        self.program = task.program
        self._site: Site | None = None

    @property
    def site(self) -> Site:
        if self._site is None:
            self._site = self.program.site(self.task, self.op)
        return self._site

    def report(self, error) -> None:
        self.program.report(error)

    def switch(self) -> None:
        self.program.scheduler.switch(self.task)


def unwrap_constexpr(x):
    """`tl.constexpr(v)` written in a kernel (the Gluon backend unwraps these too), in lists as well."""
    if isinstance(x, tl.constexpr):
        return unwrap_constexpr(x.value)
    if type(x) in (list, tuple):
        return type(x)(unwrap_constexpr(v) for v in x)
    return x


def _make_op(name: str, rule: SimRule) -> Callable:
    decl = OPS[name]

    def op(*args, **kwargs):
        bound = decl.bind(*args, **kwargs)
        bound.arguments.update({k: unwrap_constexpr(v) for k, v in bound.arguments.items()})
        try:
            decl.validate(VIEW, *bound.args, **bound.kwargs)
        except TlxCompileError as e:
            file, line, text = user_location()
            raise TlxCompileError(f"{e}\n  at {file}:{line}: {text}") from None
        ctx = OpContext(current_task(), name)
        if rule.yields:
            ctx.switch()
        return rule.fn(ctx, **bound.arguments)
    op.__name__ = op.__qualname__ = name
    op.__doc__ = decl.doc
    return op


def _load_rule_modules() -> None:
    from . import barriers, cluster, memory, mma, tasks, tma, utility  # noqa: F401  (fill RULES)


def missing_rules() -> list[str]:
    _load_rule_modules()
    return sorted(set(OPS) - set(RULES))


_MODULE: types.ModuleType | None = None


def sim_tlx_module() -> types.ModuleType:
    """The `tlx` that simulated kernels see: one function per declared op, plus the helpers."""
    global _MODULE
    if _MODULE is None:
        _load_rule_modules()
        missing = missing_rules()
        assert not missing, f"tlx.sim: ops without a simulator rule: {missing}"
        mod = types.ModuleType("tlx", "tlx as seen by kernels running on the CPU simulator")
        for name, rule in RULES.items():
            setattr(mod, name, _make_op(name, rule))
        from .tasks import install_task_helpers
        install_task_helpers(mod)
        _MODULE = mod
    return _MODULE
