"""``dsh-code mcp --http``: a bearer token by default, and no connection held forever."""

from __future__ import annotations

import json
import re
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

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
