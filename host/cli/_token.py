"""The bearer token of ``dsh-code mcp --http``: from a file or the environment, kept out of /proc.

A secret in a command line is readable by every process on the machine
(``/proc/PID/cmdline``), one in the environment by the same user's processes
(``/proc/PID/environ``) and by every process started with that environment. So the token
comes from ``--token-file`` or ``DSH_CODE_MCP_TOKEN``; the variable is taken out of the
command's environment (nothing it starts inherits it), and the token is overwritten in the
memory those two /proc files show. ``--token`` still works, with a warning.
"""

from __future__ import annotations

import contextlib
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from host.cli._errors import UsageFailure

__all__ = (
    "MIN_TOKEN_CHARS",
    "TOKEN_ENV",
    "ServeAuth",
    "read_token_file",
    "serve_auth",
    "take_token_env",
    "wipe_from_proc",
)

#: The environment variable ``dsh-code mcp`` reads its bearer token from.
TOKEN_ENV: Final = "DSH_CODE_MCP_TOKEN"
MIN_TOKEN_CHARS: Final = 16
_MAX_TOKEN_FILE_BYTES: Final = 4096


_COMMAND_LINE_WARNING: Final = (
    "dsh-code mcp: warning: --token puts the token in the command line, where every process "
    "on this machine can read it (/proc/PID/cmdline) until it is wiped at start-up, and in "
    f"your shell's history; use --token-file FILE or {TOKEN_ENV} instead"
)


@dataclass(frozen=True)
class ServeAuth:
    """The bearer token ``dsh-code mcp`` serves with (None: stdio, or ``--no-auth``)."""

    token: str | None
    generated: bool = False


def serve_auth(
    http: int | None, token: str | None, token_file: Path | None, no_auth: bool
) -> ServeAuth:
    """The token from ``--token``, ``--token-file``, ``DSH_CODE_MCP_TOKEN`` or a new one;
    a usage error for flags that mean nothing without ``--http`` or that exclude each other."""
    from_env = take_token_env()  # always: no process started from here inherits it
    if token is not None:
        wipe_from_proc(token)
    flags = [
        flag
        for flag, given in (
            ("--token", token),
            ("--token-file", token_file),
            ("--no-auth", no_auth),
        )
        if given is not None and given is not False
    ]
    if http is None and flags:
        raise UsageFailure(
            f"{flags[0]} needs --http: over stdio the client that starts dsh-code mcp is its "
            "only client, and no token is asked for"
        )
    if len(flags) > 1:
        raise UsageFailure(f"{flags[0]} and {flags[1]} exclude each other")
    if http is None or no_auth:
        return ServeAuth(None)
    if token is not None:
        with contextlib.suppress(OSError, ValueError):
            sys.stderr.write(_COMMAND_LINE_WARNING + "\n")
    value = token or (read_token_file(token_file) if token_file is not None else from_env)
    if value is None:
        import secrets

        return ServeAuth(secrets.token_urlsafe(24), generated=True)
    if len(value) < MIN_TOKEN_CHARS:
        raise UsageFailure(f"the bearer token must be at least {MIN_TOKEN_CHARS} characters")
    return ServeAuth(value)


def take_token_env() -> str | None:
    """The token in ``DSH_CODE_MCP_TOKEN`` (None if unset or empty), removed from the
    environment and from what ``/proc/self/environ`` shows."""
    value = os.environ.pop(TOKEN_ENV, None)
    if value:
        wipe_from_proc(value)
    return value or None


def read_token_file(path: Path) -> str:
    """The token in ``path``: its first line, without surrounding white space."""
    try:
        with path.open("rb") as file:  # a pipe (``<(...)``) is read once, as a file
            data = file.read(_MAX_TOKEN_FILE_BYTES + 1)
    except OSError as exc:
        raise UsageFailure(f"cannot read --token-file {path}: {exc.strerror or exc}") from None
    if len(data) > _MAX_TOKEN_FILE_BYTES:
        raise UsageFailure(f"--token-file {path} is over {_MAX_TOKEN_FILE_BYTES} bytes")
    try:
        lines = data.decode("utf-8").strip().splitlines()
    except UnicodeDecodeError:
        raise UsageFailure(f"--token-file {path} is not UTF-8 text") from None
    if not lines or not lines[0].strip():
        raise UsageFailure(f"--token-file {path} is empty")
    return lines[0].strip()


def _writable(start: int, end: int) -> bool:
    """Whether ``[start, end)`` lies in one writable mapping of this process."""
    with contextlib.suppress(OSError, ValueError), open("/proc/self/maps") as maps:
        for line in maps:
            span, perms = line.split()[:2]
            low, high = (int(bound, 16) for bound in span.split("-"))
            if low <= start and end <= high:
                return "w" in perms
    return False


def wipe_from_proc(secret: str) -> None:
    """Overwrite every copy of ``secret`` in this process's original command line and
    environment: what ``/proc/PID/cmdline`` and ``/proc/PID/environ`` read (as ``ps`` and
    password-taking tools do; Python works from its own copies)."""
    import ctypes

    data = os.fsencode(secret)
    try:
        with open("/proc/self/stat", "rb") as stat:
            fields = stat.read().rsplit(b")", 1)[1].split()
        # Fields 48-51 of stat(5) (the list starts at field 3): arg_start .. env_end.
        arg_start, arg_end, env_start, env_end = (int(field) for field in fields[45:49])
    except (OSError, ValueError, IndexError):
        return
    for start, end in ((arg_start, arg_end), (env_start, env_end)):
        if not 0 < start < end or not _writable(start, end):
            continue
        area = ctypes.string_at(start, end - start)
        at = area.find(data)
        while at >= 0:
            ctypes.memset(start + at, ord("*"), len(data))
            at = area.find(data, at + len(data))
