"""Exceptions of the code runtime.

The tree::

    Exception
    ├── ToolCallError             raised *inside a program* when a binding call fails
    ├── HoldCall                  raised *by a binding* to hold its call: the run pauses
    ├── RuntimeUsageError         raised to the *caller* who broke the runtime's contract
    │   ├── RuntimeClosedError    run() after aclose(): the runtime is no longer usable
    │   └── JournalError          a journal that cannot be read, or does not fit the run
    │                             that is to resume it (runtime._journal)
    └── RuntimeEnvironmentError   raised to the caller when *this machine* cannot give runs
                                  what the runtime needs or was asked for (the template does
                                  not start, a requested isolation level is unavailable); the
                                  runtime stays usable and the next run tries again

A run never raises for what the program did: those outcomes are ``RunResult.error``. A
binding that failed with a builtin exception (``ZeroDivisionError``, ``KeyError``, ...) raises
a ``ToolCallError`` that is also that builtin type (``tool_call_error``), so ``except
KeyError`` around a tool call works as it would around a local function; the type travels by
name, and only the builtin types in ``RECREATED_EXCEPTIONS`` are ever made.
"""

from __future__ import annotations

import builtins
import re
from typing import Final

__all__ = (
    "RECREATED_EXCEPTIONS",
    "HoldCall",
    "RuntimeClosedError",
    "RuntimeEnvironmentError",
    "RuntimeUsageError",
    "ToolCallError",
    "builtin_exception_name",
    "tool_call_error",
)


class ToolCallError(Exception):
    """Raised in a program when a binding call is rejected or fails; the program may catch it."""

    def __init__(self, tool: str, message: str, code: str = "TOOL_ERROR") -> None:
        super().__init__(tool, message, code)
        self.tool = tool
        self.message = message
        self.code = code

    def __str__(self) -> str:
        # The tool's name is said once: a message that names it already is not prefixed.
        if re.search(rf"(?<![\w.]){re.escape(self.tool)}(?!\w)", self.message):
            return f"{self.message} ({self.code})"
        return f"{self.tool}: {self.message} ({self.code})"

    def __reduce__(self) -> tuple[type[ToolCallError], tuple[str, str, str]]:
        return (type(self), (self.tool, self.message, self.code))


class HoldCall(Exception):
    """Raised by a binding to hold its call: the run ends as paused, with the call pending
    (``reason`` says why) until a resume allows or refuses it."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class RuntimeUsageError(Exception):
    """Raised when the caller breaks the runtime's contract (bad request, closed runtime)."""


class RuntimeClosedError(RuntimeUsageError):
    """Raised by ``run()`` after ``aclose()``: the runtime is no longer usable."""


class RuntimeEnvironmentError(Exception):
    """Raised when this machine cannot run programs as asked (not the caller's mistake)."""


#: Builtins a failure cannot be recreated as: the base itself, those whose constructor wants
#: other arguments, and StopIteration's kind (a future refuses it; a generator turns it into
#: RuntimeError).
_NOT_RECREATED: Final = frozenset(
    {
        "Exception",
        "ExceptionGroup",
        "StopIteration",
        "StopAsyncIteration",
        "UnicodeDecodeError",
        "UnicodeEncodeError",
        "UnicodeTranslateError",
    }
)
#: The builtin exception types a failed binding call can be raised as in a program, by name.
RECREATED_EXCEPTIONS: Final[dict[str, type[Exception]]] = {
    name: value
    for name, value in vars(builtins).items()
    if isinstance(value, type)
    and issubclass(value, Exception)
    and name == value.__name__  # not the aliases (IOError is OSError)
    and name not in _NOT_RECREATED
}
_as_builtin: dict[str, type[ToolCallError]] = {}


def builtin_exception_name(exc: BaseException) -> str | None:
    """The name of the nearest builtin type of ``exc`` that a program can be given, if any."""
    for cls in type(exc).__mro__:
        if RECREATED_EXCEPTIONS.get(cls.__name__) is cls:
            return cls.__name__
    return None


def tool_call_error(
    tool: str, message: str, code: str = "TOOL_ERROR", exception_type: str | None = None
) -> ToolCallError:
    """A ``ToolCallError``; also the builtin ``exception_type`` if it names a recreated one."""
    base = RECREATED_EXCEPTIONS.get(exception_type) if exception_type is not None else None
    if base is None:
        return ToolCallError(tool, message, code)
    cls = _as_builtin.get(base.__name__)
    if cls is None:
        # Named as the builtin, so a traceback reads "KeyError: lookup: ..." as it would locally.
        cls = type(
            base.__name__,
            (ToolCallError, base),
            {
                "__module__": "builtins",
                "__qualname__": base.__name__,
                "__doc__": f"A binding call failed with {base.__name__}.",
            },
        )
        _as_builtin[base.__name__] = cls
    return cls(tool, message, code)
