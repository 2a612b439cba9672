"""The op registry: every tlx op is declared once, with its signature, docs and argument checks.

A declaration is a function ``op(v, <user args>)`` whose body only validates, through `v`, a
`ValueView` that each backend provides (it knows what a barrier or a buffer is in that backend).
Backends attach their own rule to each declared op (`tlx.gluon.rules`, `tlx.sim.rules`); a test
walks `OPS` and fails if a backend lacks a rule.
"""
from __future__ import annotations

import inspect
from dataclasses import dataclass, field
from typing import Callable, Protocol

from ..errors import check, expected


class ValueView(Protocol):
    """What a backend tells the declarations about a runtime value."""

    backend: str

    def kind(self, x) -> str:
        """One of: buffers, buffer, barriers, barrier, tensor, scalar, descriptor, dtype, none, other."""

    def shape(self, x) -> tuple[int, ...]: ...

    def dtype(self, x): ...


@dataclass(frozen=True)
class OpDecl:
    name: str
    validate: Callable  # validate(v, *args, **kwargs): raises TlxCompileError on bad input
    signature: inspect.Signature
    doc: str
    aliases: dict[str, str] = field(default_factory=dict)   # Meta TLX's keyword name -> ours

    def __call__(self, *args, **kwargs):
        from ..errors import TlxCompileError
        raise TlxCompileError(f"tlx.{self.name}: called outside a @tlx.jit kernel; decorate the kernel with "
                              "@tlx.jit (not @triton.jit)")

    def bind(self, *args, **kwargs) -> inspect.BoundArguments:
        try:
            bound = self.signature.bind(*args, **self.renamed(kwargs))
        except TypeError as e:
            raise TypeError(f"tlx.{self.name}{self.signature}: {e}") from None
        bound.apply_defaults()
        return bound

    def renamed(self, kwargs: dict) -> dict:
        """Keywords under Meta TLX's names (`size=`, `buffer_idx=`, ...) moved to ours, so kernels written
        for TLX keep their calls."""
        out = dict(kwargs)
        for theirs, ours in self.aliases.items():
            if theirs in out:
                if ours in out:
                    raise TypeError(f"tlx.{self.name}{self.signature}: '{theirs}' (TLX's name) and '{ours}' name "
                                    "the same argument; give one")
                out[ours] = out.pop(theirs)
        return out


OPS: dict[str, OpDecl] = {}


def tlx_op(fn: Callable | None = None, *, aliases: dict[str, str] | None = None):
    """Declare an op: `fn(v, ...)` validates; the user-facing signature is fn's minus `v`.
    `aliases` maps Meta TLX's keyword names, where they differ, to the declaration's."""
    if fn is None:
        return lambda f: tlx_op(f, aliases=aliases)
    sig = inspect.signature(fn)
    params = list(sig.parameters.values())[1:]
    assert all(ours in sig.parameters for ours in (aliases or {}).values()), f"{fn.__name__}: alias to no parameter"
    decl = OpDecl(fn.__name__, fn, sig.replace(parameters=params), inspect.getdoc(fn) or "", dict(aliases or {}))
    OPS[decl.name] = decl
    return decl


# Shared argument checks, one message shape everywhere.

def check_kind(v: ValueView, op: str, arg: str, x, kinds: tuple[str, ...], hint: str = "") -> None:
    k = v.kind(x)
    check(k in kinds, lambda: expected(op, arg, " or ".join(kinds), f"{k} {x!r}"[:160], hint))


def check_barrier(v: ValueView, op: str, arg: str, x) -> None:
    check_kind(v, op, arg, x, ("barrier",), "index the barrier array first, e.g. bars[i]"
               if v.kind(x) == "barriers" else "allocate it with tlx.alloc_barriers")


def check_buffer(v: ValueView, op: str, arg: str, x) -> None:
    check_kind(v, op, arg, x, ("buffer",), "index the buffer ring first, e.g. bufs[i]"
               if v.kind(x) == "buffers" else "allocate it with tlx.local_alloc")


def check_int(op: str, arg: str, x, lo: int | None = None, hi: int | None = None, multiple: int = 1) -> None:
    ok = isinstance(x, int) and not isinstance(x, bool)
    check(ok, lambda: expected(op, arg, "a compile-time int", repr(x)))
    check(lo is None or x >= lo, lambda: expected(op, arg, f">= {lo}", x))
    check(hi is None or x <= hi, lambda: expected(op, arg, f"<= {hi}", x))
    check(x % multiple == 0, lambda: expected(op, arg, f"a multiple of {multiple}", x))
