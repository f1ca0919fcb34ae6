"""``dsh-code mcp --http``: a bearer token by default, and no connection held forever."""

from __future__ import annotations

import re
import socket
import subprocess
import sys
import time
from collections.abc import Iterator

import anyio
import httpx2
import pytest

from host.codemode import CodeMode
from host.mcp import McpServeConfig, serve
from host.sandbox import SubprocessRuntime
from host.tools import ToolRegistry, ToolsConfig, tool

from .support import BINDINGS, child_env

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


async def test_a_connection_that_never_finishes_its_headers_is_closed() -> None:
    @tool
    def noop() -> int:
        """Nothing."""
        return 0

    registry = ToolRegistry(ToolsConfig(mode="code"))
    registry.register(noop)
    codemode = CodeMode(registry, SubprocessRuntime())  # never started: no run happens
    config = McpServeConfig(http_port=0, token="t" * 20, request_timeout_s=0.5)
    ready: list[str] = []
    got = anyio.Event()

    def on_ready(url: str) -> None:
        ready.append(url)
        got.set()

    async with anyio.create_task_group() as group:
        group.start_soon(lambda: serve(codemode, config, on_ready=on_ready))
        with anyio.fail_after(20):
            await got.wait()
        port = int(ready[0].rsplit(":", 1)[1].split("/")[0])

        def slow_client() -> tuple[bytes, float]:
            with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
                sock.sendall(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n")  # and never more
                sent = time.monotonic()
                data = sock.recv(1024)  # b"" once the server closes it
                return data, time.monotonic() - sent

        data, took = await anyio.to_thread.run_sync(slow_client)
        group.cancel_scope.cancel()
    assert data == b""
    assert took < 8  # closed by the bound (0.5 s), not held until our own 10 s timeout
