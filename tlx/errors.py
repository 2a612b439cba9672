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


def user_error_from(exc: BaseException) -> BaseException:
    """Triton wraps errors raised inside a kernel in its CompilationError (which shows the kernel source
    and a caret). Give the user the tlx error class with that located message, chained to the original."""
    innermost, cause = exc, exc.__cause__
    while cause is not None and not isinstance(cause, TlxError):
        innermost, cause = cause, cause.__cause__
    if cause is None:
        return exc
    if isinstance(cause.__cause__, type(exc)):   # an already located tlx error from a nested call
        return cause
    located = cause.__class__.__new__(cause.__class__)
    located.__dict__.update(cause.__dict__)
    located.args = (f"{innermost}",)
    return located
