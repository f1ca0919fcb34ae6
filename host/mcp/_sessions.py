"""The MCP server's sessions: one code-mode session per client, its variables kept between
``run_code`` calls.

Which client a request comes from: over stdio the server has one client (the pipe), so one
session; over streamable HTTP with MCP sessions (protocol versions up to 2025-11-25) the
``Mcp-Session-Id`` the transport gave the client; over HTTP without them (2026-07-28: every
request stands alone) an explicit handle, which ``run_code`` returns and takes back as its
``session`` argument. HTTP sessions are bounded: at most ``max_sessions`` are kept (the
least recently used goes first) and one unused for ``idle_s`` is dropped.
"""

from __future__ import annotations

import copy
import secrets
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from host.codemode import CodeMode

__all__ = ("STDIO_CLIENT", "ClientSessions", "client_key", "handle_key", "needs_handle")

#: The key of the one client a stdio server has.
STDIO_CLIENT: Final = ""
_HEADER: Final = "mcp-session-id"


def _headers(ctx: Any) -> Any:
    request = getattr(ctx, "request", None)  # the HTTP request; None over stdio
    return getattr(request, "headers", None)


def needs_handle(ctx: Any) -> bool:
    """Whether the request came over HTTP without an MCP session (so a handle is needed)."""
    headers = _headers(ctx)
    return headers is not None and not headers.get(_HEADER)


def client_key(ctx: Any) -> str:
    """The client of a request that carries its own session: stdio, or an HTTP MCP session."""
    headers = _headers(ctx)
    if headers is None:
        return STDIO_CLIENT
    return f"http:{headers.get(_HEADER)}"


def handle_key(handle: str) -> str:
    """The key of the session a client names by the handle it was given."""
    return f"handle:{handle}"


@dataclass
class _Entry:
    codemode: CodeMode
    used: float


class ClientSessions:
    """The sessions of one server's clients, each a view of the code mode over its session."""

    def __init__(
        self,
        codemode: CodeMode,
        *,
        max_state_bytes: int,
        max_sessions: int,
        idle_s: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if max_sessions < 1:
            raise ValueError(f"max_sessions must be at least 1, got {max_sessions!r}")
        if not idle_s > 0:
            raise ValueError(f"session_idle_s must be positive, got {idle_s!r}")
        self.codemode = codemode
        self.max_state_bytes = max_state_bytes
        self.max_sessions = max_sessions
        self.idle_s = idle_s
        self._clock = clock
        self._entries: OrderedDict[str, _Entry] = OrderedDict()

    @staticmethod
    def supported(codemode: CodeMode) -> bool:
        """Whether the code mode's runtime offers sessions (a ``RayRuntime`` and TypeScript
        runtimes do not)."""
        runtime = codemode.runtime
        return callable(getattr(runtime, "session", None)) and codemode.language == "python"

    def __len__(self) -> int:
        return len(self._entries)

    def _view(self) -> CodeMode:
        """The code mode, its runs going to a new empty session (same registry and config)."""
        session = self.codemode.runtime.session(  # type: ignore[attr-defined]
            state=None, max_state_bytes=self.max_state_bytes
        )
        from host.sandbox._session import SessionRuntime

        view = copy.copy(self.codemode)  # shares the registry, its views and call ids
        view.runtime = SessionRuntime(self.codemode.runtime, session)
        return view

    def _expire(self, now: float) -> None:
        for key in [k for k, e in self._entries.items() if now - e.used > self.idle_s]:
            if key != STDIO_CLIENT:  # the only client of a stdio server never goes away
                del self._entries[key]

    def get(self, key: str) -> CodeMode:
        """The code mode of ``key``'s session (a new, empty one for a new client)."""
        now = self._clock()
        self._expire(now)
        entry = self._entries.get(key)
        if entry is None:
            entry = self._entries[key] = _Entry(self._view(), now)
            while len(self._entries) > self.max_sessions:
                self._entries.popitem(last=False)
        entry.used = now
        self._entries.move_to_end(key)
        return entry.codemode

    def known(self, key: str) -> bool:
        """Whether ``key`` has a session now (not dropped as idle)."""
        self._expire(self._clock())
        return key in self._entries

    @staticmethod
    def new_handle() -> str:
        """A handle for a client without an MCP session (returned to it as ``session``)."""
        return secrets.token_urlsafe(12)

    def reset(self, key: str) -> bool:
        """Start ``key``'s session over, empty; whether it had one."""
        had = self._entries.pop(key, None) is not None
        self.get(key)
        return had
