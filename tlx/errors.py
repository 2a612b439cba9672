"""Errors a user can trigger, all with one message shape:
``tlx.<op>: '<arg>' must be <expected>, got <actual>``."""
from __future__ import annotations

from typing import Callable


class TlxError(Exception):
    """Base class of every error tlx raises on purpose."""


class TlxCompileError(TlxError):
    """A kernel is invalid: the message names the op, the argument and the kernel line."""


class TlxUnsupported(TlxError):
    """A valid TLX feature that this backend or arch cannot do (never silently skipped)."""

    def __init__(self, op: str, backend: str, detail: str = ""):
        self.op, self.backend = op, backend
        name = op if op.startswith("tl.") else f"tlx.{op}"
        msg = f"{name} is not supported on the {backend} backend"
        super().__init__(msg + (f": {detail}" if detail else ""))


class TlxLaunchError(TlxError):
    """Wrong arguments at launch: count, dtype, device."""


class ConfigRejected(TlxError):
    """A kernel configuration that cannot run (the tuner skips it)."""


def check(cond: bool, message: Callable[[], str], error: type[Exception] = TlxCompileError) -> None:
    """Raise `error(message())` unless `cond`; the message is built only on failure."""
    if not cond:
        raise error(message())


def expected(op: str, arg: str, what: str, got: object, hint: str = "") -> str:
    msg = f"tlx.{op}: '{arg}' must be {what}, got {got}"
    return msg + (f" ({hint})" if hint else "")


def _cause_chain(exc: BaseException) -> list:
    """exc, its __cause__, that one's __cause__, ... (stopping at a cycle)."""
    chain, seen = [], set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        chain.append(exc)
        exc = exc.__cause__
    return chain


def user_error_from(exc: BaseException) -> BaseException:
    """Triton wraps errors raised inside a kernel in its CompilationError (which shows the kernel source
    and a caret), and an error inside a task again at the task region's call. Give the user the tlx
    error class with the innermost located message (the line inside the task), or, for an error that
    is not tlx's, a TlxCompileError with that message. Returns `exc` itself when it already says it all."""
    chain = _cause_chain(exc)
    tlx_at = next((i for i in range(1, len(chain)) if isinstance(chain[i], TlxError)), None)
    if tlx_at is None:
        located = [c for c in chain if getattr(c, "error_message", None)]
        deepest = located[-1] if located else exc
        root = chain[-1]
        message = str(deepest)
        if root is not deepest and not hasattr(root, "error_message"):
            message += f"\n{type(root).__name__}: {root}"
        return exc if deepest is exc and root is exc else TlxCompileError(message)
    cause, innermost = chain[tlx_at], chain[tlx_at - 1]
    if isinstance(cause.__cause__, type(exc)):   # an already located tlx error from a nested call
        return cause
    located = cause.__class__.__new__(cause.__class__)
    located.__dict__.update(cause.__dict__)
    located.args = (f"{innermost}",)
    return located


def raise_user_error(exc: BaseException):
    """Raise what user_error_from makes of `exc`, chained to it (never to itself)."""
    err = user_error_from(exc)
    if err is exc:
        raise exc
    raise err from exc
