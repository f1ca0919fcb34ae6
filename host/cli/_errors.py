"""The command's own failure: a usage error (exit 2), reported as one line, never a traceback."""

from __future__ import annotations

from typing import Final

__all__ = ("EXIT_FAILED", "EXIT_OK", "EXIT_PAUSED", "EXIT_USAGE", "UsageFailure")

EXIT_OK: Final = 0
EXIT_FAILED: Final = 1
EXIT_USAGE: Final = 2
#: The run paused on held calls (sysexits' EX_TEMPFAIL: not failed, to be continued).
EXIT_PAUSED: Final = 75


class UsageFailure(Exception):
    """Bad input to the command (a flag, a file, a bindings file, an MCP server): exit 2."""

    exit_code = EXIT_USAGE

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message
