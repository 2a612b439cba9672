"""The Gluon backend's rule table: one lowering rule per declared op, wrapped as Gluon builtins.

A rule is `rule(ctx, *args, **kwargs)`; the wrapper unwraps constexprs, runs the op's declaration
checks (shared with the simulator) and hands over to the rule."""
from __future__ import annotations

import types
from dataclasses import dataclass

from triton.experimental.gluon import language as gl

from ..errors import TlxCompileError
from ..language import OPS
from ._triton_compat import builtin, gl_core
from . import layouts
from .values import VIEW

RULES: dict[str, callable] = {}
RAW_ARGS: dict[str, tuple[str, ...]] = {}   # arguments a rule wants as Gluon values (constexprs kept)


def gluon_rule(name: str, raw: tuple[str, ...] = ()):
    def register(fn):
        if name not in OPS:
            raise KeyError(f"gluon_rule: no declared op named {name!r}")
        RULES[name] = fn
        RAW_ARGS[name] = raw
        return fn
    return register


@dataclass
class Ctx:
    """What a rule may use: the Gluon semantic and code generator of the function being built."""
    semantic: object
    generator: object

    @property
    def num_warps(self) -> int:
        return gl_core._unwrap_if_constexpr(gl.num_warps(_semantic=self.semantic, _generator=self.generator))

    def convert(self, value, layout):
        """`value` in `layout`. An Auto value is first anchored with the default blocked layout (a
        function of its shape only), so anchoring never conflicts with other anchors of its component."""
        if isinstance(value.type.layout, gl.AutoLayout):
            value = self.semantic.set_auto_layout(value, layouts.blocked_for(value.shape, self.num_warps))
        return self.semantic.to_layout(value, layout)

    def call(self, fn, *args, **kwargs):
        """Call a Gluon builtin from inside a rule."""
        return fn(*args, **kwargs, _semantic=self.semantic)


def unwrap(x):
    x = gl_core._unwrap_if_constexpr(x)
    if isinstance(x, (list, tuple, gl.tuple)):
        return type(x)(unwrap(v) for v in x) if not isinstance(x, gl.tuple) else tuple(unwrap(v) for v in x)
    return x


def _make_builtin(name: str):
    decl, rule = OPS[name], RULES[name]

    raw = RAW_ARGS[name]

    def op(*args, _semantic=None, _generator=None, **kwargs):
        bound = decl.bind(*args, **kwargs)
        values = {k: v if k in raw else unwrap(v) for k, v in bound.arguments.items()}
        decl.validate(VIEW, **values)
        return rule(Ctx(_semantic, _generator), **values)

    op.__name__ = op.__qualname__ = name
    op.__doc__ = decl.doc
    return builtin(op)


def build_tlx_module(extra: dict) -> types.ModuleType:
    """The `tlx` that generated Gluon code sees: every declared op plus `extra` names."""
    from . import barriers, memory, mma, tasks, tma, utility  # noqa: F401  (fill RULES)
    missing = sorted(set(OPS) - set(RULES))
    if missing:
        raise TlxCompileError(f"tlx gluon backend: no lowering rule for {missing}")
    mod = types.ModuleType("tlx.gluon.tlx")
    for name in OPS:
        setattr(mod, name, _make_builtin(name))
    for name, value in extra.items():
        setattr(mod, name, value)
    return mod
