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

A run never raises for what the program did: those outcomes are ``RunResult.error``.
"""

from __future__ import annotations

__all__ = (
    "HoldCall",
    "RuntimeClosedError",
    "RuntimeEnvironmentError",
    "RuntimeUsageError",
    "ToolCallError",
)


class ToolCallError(Exception):
    """Raised in a program when a binding call is rejected or fails; the program may catch it."""

    def __init__(self, tool: str, message: str, code: str = "TOOL_ERROR") -> None:
        super().__init__(tool, message, code)
        self.tool = tool
        self.message = message
        self.code = code

    def __str__(self) -> str:
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
