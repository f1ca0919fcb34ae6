"""Exceptions of the code runtime.

The tree::

    Exception
    ├── ToolCallError             raised *inside a program* when a binding call fails
    ├── RuntimeUsageError         raised to the *caller* who broke the runtime's contract
    │   └── RuntimeClosedError    run() after aclose(): the runtime is no longer usable
    └── RuntimeEnvironmentError   raised to the caller when *this machine* cannot give runs
                                  what the runtime needs or was asked for (the template does
                                  not start, a requested isolation level is unavailable); the
                                  runtime stays usable and the next run tries again

A run never raises for what the program did: those outcomes are ``RunResult.error``.
"""

from __future__ import annotations

import re

__all__ = ("RuntimeClosedError", "RuntimeEnvironmentError", "RuntimeUsageError", "ToolCallError")


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


class RuntimeUsageError(Exception):
    """Raised when the caller breaks the runtime's contract (bad request, closed runtime)."""


class RuntimeClosedError(RuntimeUsageError):
    """Raised by ``run()`` after ``aclose()``: the runtime is no longer usable."""


class RuntimeEnvironmentError(Exception):
    """Raised when this machine cannot run programs as asked (not the caller's mistake)."""
