"""``dsh-code mcp --http``: a bearer token by default, and no connection held forever."""

from __future__ import annotations

import contextlib
import json
import re
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx2
import psutil
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from host.codemode import CodeMode
from host.mcp import McpServeConfig, serve
from host.sandbox import SubprocessRuntime
from host.tools import ToolRegistry, ToolsConfig, tool

from .support import BINDINGS, child_env, demo_option

pytestmark = [
    pytest.mark.timeout(60),
    pytest.mark.parametrize("anyio_backend", ["asyncio"]),  # uvicorn
    pytest.mark.anyio,
]

INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "test", "version": "1"},
    },
}
ACCEPT = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


def _start(*extra: str) -> tuple[subprocess.Popen[str], str]:
    process = subprocess.Popen(
        [sys.executable, "-m", "host.cli", "mcp", "-b", str(BINDINGS), "--http", "0", *extra],
        env=child_env(),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stderr is not None
    return process, process.stderr.readline()


def _stop(process: subprocess.Popen[str]) -> None:
    process.terminate()
    try:
        process.wait(timeout=15)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
    if process.stderr is not None:
        process.stderr.close()


@pytest.fixture
def generated() -> Iterator[tuple[str, str]]:
    process, line = _start()
    try:
        found = re.search(r"serving on (http://127\.0\.0\.1:\d+/mcp) \(bearer token: (\S+)\)", line)
        assert found is not None, line
        yield found.group(1), found.group(2)
    finally:
        _stop(process)


async def test_a_token_is_required_by_default(generated: tuple[str, str]) -> None:
    url, token = generated
    async with httpx2.AsyncClient(timeout=10) as http:
        for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": token}):
            refused = await http.post(url, json=INITIALIZE, headers={**ACCEPT, **headers})
            assert refused.status_code == 401
            assert refused.headers["www-authenticate"].startswith("Bearer")
        ok = await http.post(
            url, json=INITIALIZE, headers={**ACCEPT, "Authorization": f"Bearer {token}"}
        )
        assert ok.status_code == 200, ok.text
        evil = await http.post(  # the Host check stays (DNS rebinding)
            url,
            json=INITIALIZE,
            headers={**ACCEPT, "Authorization": f"Bearer {token}", "Host": "evil.example"},
        )
        assert evil.status_code in (403, 421)


async def test_no_auth_is_an_explicit_choice() -> None:
    process, line = _start("--no-auth")
    try:
        found = re.search(r"serving on (http://127\.0\.0\.1:\d+/mcp) \(no auth\)", line)
        assert found is not None, line
        async with httpx2.AsyncClient(timeout=10) as http:
            ok = await http.post(found.group(1), json=INITIALIZE, headers=ACCEPT)
        assert ok.status_code == 200
    finally:
        _stop(process)


@contextlib.asynccontextmanager
async def _serving(**settings: Any) -> AsyncIterator[int]:
    """``serve`` over HTTP in this loop with ``settings`` (token: ``TOKEN``); its port."""

    @tool
    def noop() -> int:
        """Nothing."""
        return 0

    registry = ToolRegistry(ToolsConfig(mode="code"))
    registry.register(noop)
    codemode = CodeMode(registry, SubprocessRuntime())  # never started: no run happens
    config = McpServeConfig(http_port=0, token=TOKEN, **settings)
    ready: list[str] = []
    got = anyio.Event()

    def on_ready(url: str) -> None:
        ready.append(url)
        got.set()

    async with anyio.create_task_group() as group:
        group.start_soon(lambda: serve(codemode, config, on_ready=on_ready))
        with anyio.fail_after(20):
            await got.wait()
        yield int(ready[0].rsplit(":", 1)[1].split("/")[0])
        group.cancel_scope.cancel()


TOKEN = "t" * 20
_AUTHORIZED = (
    f"GET /elsewhere HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {TOKEN}\r\n\r\n"
).encode()
_BUSY = (  # an authorized request whose body never comes: the app waits for it
    f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {TOKEN}\r\n"
    "Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{"
).encode()


def _closed(sock: socket.socket, within: float) -> bool:
    """Whether the server closes ``sock`` (EOF) within ``within`` seconds."""
    sock.settimeout(within)
    try:
        return sock.recv(1) == b""
    except TimeoutError:
        return False
    except ConnectionResetError:
        return True


def _connect(port: int, send: bytes) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    sock.sendall(send)
    return sock


async def test_a_connection_that_never_finishes_its_headers_is_closed() -> None:
    async with _serving(request_timeout_s=0.5) as port:

        def slow_client() -> tuple[bool, float]:
            with _connect(port, _HALF_OPEN) as sock:
                sent = time.monotonic()
                return _closed(sock, 10), time.monotonic() - sent

        closed, took = await anyio.to_thread.run_sync(slow_client)
    assert closed
    assert took < 8  # closed by the bound (0.5 s), not held until our own 10 s timeout


async def test_a_new_connection_must_send_its_headers_within_the_header_timeout() -> None:
    async with _serving(header_timeout_s=0.5) as port:  # the request timeout stays 30 s

        def slow_client() -> tuple[bool, float]:
            with _connect(port, _HALF_OPEN) as sock:
                sent = time.monotonic()
                return _closed(sock, 20), time.monotonic() - sent

        closed, took = await anyio.to_thread.run_sync(slow_client)
    assert closed
    assert took < 8


async def test_a_request_without_the_token_is_answered_401_and_its_connection_closed() -> None:
    async with _serving() as port:

        def rejected() -> tuple[bytes, bool]:
            with _connect(port, _REJECTED) as sock:
                return _response(sock), _closed(sock, 5)

        response, closed = await anyio.to_thread.run_sync(rejected)
    assert response.startswith(b"HTTP/1.1 401 ")
    assert b"connection: close" in response.lower()
    assert closed  # not kept alive for the next try: it would hold a connection


async def test_pending_connections_past_their_cap_close_the_oldest() -> None:
    async with _serving(max_pending_connections=8) as port:

        def flood() -> tuple[list[bool], bytes]:
            opened = [_connect(port, _HALF_OPEN) for _ in range(20)]
            try:
                time.sleep(0.5)
                closed = [_closed(sock, 0.2) for sock in opened]
                with _connect(port, _AUTHORIZED) as client:
                    return closed, _response(client)
            finally:
                for sock in opened:
                    sock.close()

        closed, response = await anyio.to_thread.run_sync(flood)
    assert closed == [True] * 12 + [False] * 8
    assert response.startswith(b"HTTP/1.1 404 ")  # the client that sent the token is served


async def test_admitted_connections_past_their_cap_close_the_least_recently_used_idle_one() -> None:
    async with _serving(max_connections=2) as port:

        def clients() -> tuple[list[bytes], list[bool]]:
            opened = []
            try:
                responses = []
                for _ in range(3):
                    opened.append(_connect(port, _AUTHORIZED))
                    responses.append(_response(opened[-1]))
                return responses, [_closed(sock, 0.5) for sock in opened]
            finally:
                for sock in opened:
                    sock.close()

        responses, closed = await anyio.to_thread.run_sync(clients)
    assert [r.split(b" ")[1] for r in responses] == [b"404"] * 3
    assert closed == [True, False, False]


async def test_a_request_gets_503_only_when_every_admitted_connection_is_busy() -> None:
    async with _serving(max_connections=2) as port:

        def clients() -> bytes:
            busy = [_connect(port, _BUSY) for _ in range(2)]
            try:
                time.sleep(0.5)  # both admitted, each waiting for its body
                with _connect(port, _AUTHORIZED) as third:
                    return _response(third)
            finally:
                for sock in busy:
                    sock.close()

        response = await anyio.to_thread.run_sync(clients)
    assert response.startswith(b"HTTP/1.1 503 ")
    assert b"retry-after: 1" in response.lower()


SNOOP_BINDINGS = """
import subprocess
from host.tools import tool

@tool
def inherited() -> str:
    \"\"\"What a process this command starts finds in DSH_CODE_MCP_TOKEN.\"\"\"
    done = subprocess.run(["sh", "-c", "printf %s \\"$DSH_CODE_MCP_TOKEN\\""], capture_output=True)
    return done.stdout.decode()
"""

# What the red team's program did: read every command line (and environment) it can.
SNOOP = """
import os
token = {token!r}.encode()
found = []
for pid in os.listdir("/proc"):
    for part in ("cmdline", "environ"):
        try:
            with open(f"/proc/{{pid}}/{{part}}", "rb") as file:
                if token in file.read():
                    found.append(part)
        except OSError:
            pass
return {{"found": found, "inherited": await tools.inherited()}}
"""


def _in_proc(pid: int, token: str) -> list[str]:
    """Where ``token`` shows in /proc for ``pid`` and every process below it."""
    found = []
    for process in [psutil.Process(pid), *psutil.Process(pid).children(recursive=True)]:
        for part in ("cmdline", "environ"):
            try:
                data = Path(f"/proc/{process.pid}/{part}").read_bytes()
            except OSError:
                continue
            if token.encode() in data:
                found.append(f"{process.pid} ({process.name()}) {part}")
    return found


@pytest.mark.parametrize("given", ["environment", "file", "flag", "generated"])
async def test_the_token_shows_in_no_command_line_or_environment(
    tmp_path: Path, given: str
) -> None:
    token = "red-team-0123456789-abcdef"
    bindings = tmp_path / "snoop.py"
    bindings.write_text(SNOOP_BINDINGS)
    env = child_env()
    env.pop("DSH_CODE_MCP_TOKEN", None)
    flags = ["--isolation", "process", "--mcp", demo_option()]
    if given == "environment":
        env["DSH_CODE_MCP_TOKEN"] = token
    elif given == "file":
        (tmp_path / "token").write_text(token + "\n")
        flags += ["--token-file", str(tmp_path / "token")]
    elif given == "flag":
        flags += ["--token", token]
    process = subprocess.Popen(
        [sys.executable, "-m", "host.cli", "mcp", "-b", str(bindings), "--http", "0", *flags],
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stderr is not None
        line = process.stderr.readline()
        if given == "flag":
            assert "--token puts the token in the command line" in line, line
            assert "use --token-file FILE or DSH_CODE_MCP_TOKEN instead" in line
            line = process.stderr.readline()
        found = re.search(r"serving on (http://127\.0\.0\.1:\d+/mcp) \((.*?)\)", line)
        assert found is not None, line
        if given == "generated":
            token = found.group(2).removeprefix("bearer token: ")
        else:
            assert token not in line  # a token given is not printed
        assert _in_proc(process.pid, token) == []
        async with (
            httpx2.AsyncClient(
                headers={"Authorization": f"Bearer {token}"}, timeout=httpx2.Timeout(30, read=60)
            ) as http,
            Client(streamable_http_client(found.group(1), http_client=http)) as client,
        ):
            result = await client.call_tool("run_code", {"code": SNOOP.format(token=token)})
        assert result.is_error is False, result.content
        facts = json.loads(json.dumps(result.structured_content))
        assert facts["result"] == {"found": [], "inherited": ""}
        assert _in_proc(process.pid, token) == []  # nor in the template, the MCP server, a run
    finally:
        _stop(process)


_REJECTED = (
    b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer wrong-token\r\n"
    b"Content-Type: application/json\r\nContent-Length: 2\r\n\r\n{}"
)
_HALF_OPEN = b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n"  # and never the rest


def _response(sock: socket.socket) -> bytes:
    """One whole response (headers and a Content-Length body), or what came before EOF."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(4096)
        if not chunk:
            return data
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = re.search(rb"(?i)content-length: *(\d+)", head)
    while length is not None and len(body) < int(length.group(1)):
        chunk = sock.recv(4096)
        if not chunk:
            break
        body += chunk
    return head + b"\r\n\r\n" + body


def _flood(port: int, rejected: int, half_open: int) -> list[socket.socket]:
    """Connections without the token: answered 401 (and kept open, if the server lets
    them), and ones that never finish their headers."""
    opened: list[socket.socket] = []
    try:
        for _ in range(rejected):
            sock = socket.create_connection(("127.0.0.1", port), timeout=10)
            opened.append(sock)
            sock.sendall(_REJECTED)
            _response(sock)  # 401 (or, once the server is full, 503)
        for _ in range(half_open):
            sock = socket.create_connection(("127.0.0.1", port), timeout=10)
            opened.append(sock)
            sock.sendall(_HALF_OPEN)
    except BaseException:
        for sock in opened:
            sock.close()
        raise
    return opened


async def test_unauthenticated_connections_cannot_lock_out_a_client(
    generated: tuple[str, str],
) -> None:
    url, token = generated
    port = int(url.rsplit(":", 1)[1].split("/")[0])
    flood = await anyio.to_thread.run_sync(_flood, port, 100, 500)
    try:
        started = time.monotonic()
        with anyio.fail_after(25):  # the 30 s request timeout must not be what frees it
            async with (
                httpx2.AsyncClient(
                    headers={"Authorization": f"Bearer {token}"},
                    timeout=httpx2.Timeout(30, read=60),
                ) as http,
                Client(streamable_http_client(url, http_client=http)) as client,
            ):
                result = await client.call_tool("run_code", {"code": "return 6 * 7"})
        took = time.monotonic() - started
    finally:
        for sock in flood:
            sock.close()
    assert result.is_error is False, result.content
    assert (result.structured_content or {})["result"] == 42
    assert took < 15  # not held until the flood's connections time out
