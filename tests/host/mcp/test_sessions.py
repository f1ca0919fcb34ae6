"""The MCP server's client sessions: which client a request is, and how many are kept."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from host.codemode import CodeMode
from host.mcp._sessions import STDIO_CLIENT, ClientSessions, client_key, handle_key, needs_handle
from host.tools import ToolRegistry, ToolsConfig


class _Runtime:
    """A runtime that offers sessions and records them (no run happens here)."""

    language = "python"
    isolation = "process"

    def __init__(self) -> None:
        self.opened: list[dict[str, Any]] = []

    def session(self, **options: Any) -> object:
        self.opened.append(options)
        return SimpleNamespace(options=options)

    async def run(self, request: Any, **resume: Any) -> Any:
        raise AssertionError("not here")

    async def aclose(self) -> None:
        return None

    async def __aenter__(self) -> _Runtime:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        return None


class _Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _sessions(
    max_sessions: int = 3, idle_s: float = 10.0
) -> tuple[ClientSessions, _Runtime, _Clock]:
    runtime, clock = _Runtime(), _Clock()
    codemode = CodeMode(ToolRegistry(ToolsConfig(mode="code")), runtime)
    store = ClientSessions(
        codemode, max_state_bytes=1234, max_sessions=max_sessions, idle_s=idle_s, clock=clock
    )
    return store, runtime, clock


def _ctx(headers: dict[str, str] | None) -> Any:
    return SimpleNamespace(request=None if headers is None else SimpleNamespace(headers=headers))


def test_the_client_of_a_request() -> None:
    assert (client_key(_ctx(None)), needs_handle(_ctx(None))) == (STDIO_CLIENT, False)
    legacy = _ctx({"mcp-session-id": "abc"})
    assert (client_key(legacy), needs_handle(legacy)) == ("http:abc", False)
    assert needs_handle(_ctx({})) is True  # HTTP without an MCP session


def test_each_client_gets_its_own_view_over_its_own_session() -> None:
    store, runtime, _ = _sessions()
    a, again, b = store.get("http:a"), store.get("http:a"), store.get("http:b")
    assert a is again and a is not b
    assert a.registry is store.codemode.registry and a.config is store.codemode.config
    assert store.codemode.runtime is runtime  # the server's own code mode is untouched
    assert runtime.opened == [{"state": None, "max_state_bytes": 1234}] * 2
    store.reset("http:a")
    assert store.get("http:a") is not a and len(runtime.opened) == 3


def test_sessions_are_bounded_by_count_and_idleness_but_stdio_stays() -> None:
    store, _, clock = _sessions(max_sessions=3, idle_s=10.0)
    stdio = store.get(STDIO_CLIENT)
    for key in ("http:1", "http:2", "http:3"):
        clock.now += 1
        store.get(key)
    assert len(store) == 3 and not store.known(STDIO_CLIENT)  # the least recently used went
    clock.now += 1
    store.get("http:1")  # used again: now the most recent
    store.get("http:4")
    assert [store.known(k) for k in ("http:1", "http:2", "http:3", "http:4")] == [
        True,
        False,
        True,
        True,
    ]
    clock.now += 60
    assert not store.known("http:1") and len(store) == 0  # idle for longer than idle_s
    kept = store.get(STDIO_CLIENT)
    assert kept is not stdio
    clock.now += 600
    assert store.known(STDIO_CLIENT)  # the one client of a stdio server is never idle-dropped
    assert handle_key("x") != client_key(_ctx({"mcp-session-id": "x"}))


def test_the_bounds_are_checked() -> None:
    codemode = CodeMode(ToolRegistry(ToolsConfig(mode="code")), _Runtime())
    with pytest.raises(ValueError, match="max_sessions"):
        ClientSessions(codemode, max_state_bytes=1, max_sessions=0, idle_s=1.0)
    with pytest.raises(ValueError, match="session_idle_s"):
        ClientSessions(codemode, max_state_bytes=1, max_sessions=1, idle_s=0.0)
    assert ClientSessions.supported(codemode)
    plain = CodeMode(ToolRegistry(ToolsConfig(mode="code")), SimpleNamespace())
    assert not ClientSessions.supported(plain)
