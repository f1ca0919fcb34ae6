"""``dsh-code mcp`` over stdio: a start line, Ctrl-C ends it, stdout stays the MCP channel."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import warnings
from pathlib import Path

import anyio
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.shared.exceptions import MCPDeprecationWarning

from host.mcp._stdio import FdLines, FdWriter

from .support import BINDINGS, DEMO, child_env, pid_alive, wait_gone

pytestmark = [pytest.mark.timeout(60), pytest.mark.anyio]

NOISY = '''
import os
print("printed at import")
os.system("echo from a subprocess at import")
from host.tools import tool

@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    print("printed inside the tool")
    os.system("echo from a subprocess inside the tool")
    return a + b
'''


async def test_lines_come_whole_and_a_cancel_ends_the_wait_at_once() -> None:
    read, write = os.pipe()
    try:
        lines = FdLines(read)
        os.write(write, b'{"a": 1}\n{"b":')
        assert await lines.__anext__() == '{"a": 1}\n'
        with anyio.move_on_after(0.2) as scope:  # nothing more comes: a cancel must end it
            await lines.__anext__()
        assert scope.cancelled_caught
        os.write(write, b" 2}\n")
        assert await lines.__anext__() == '{"b": 2}\n'
        os.close(write)
        write = -1
        with pytest.raises(StopAsyncIteration):
            await lines.__anext__()
    finally:
        os.close(read)
        if write >= 0:
            os.close(write)


async def test_a_regular_file_is_read_too_and_the_writer_writes_everything(
    tmp_path: Path,
) -> None:
    path = tmp_path / "input"
    path.write_bytes(b"one\ntwo")
    fd = os.open(path, os.O_RDONLY)
    try:
        assert [line async for line in FdLines(fd)] == ["one\n", "two"]
    finally:
        os.close(fd)
    read, write = os.pipe()
    try:
        await FdWriter(write).write("x" * 10_000 + "\n")
        await FdWriter(write).flush()
        assert os.read(read, 20_000) == b"x" * 10_000 + b"\n"
    finally:
        os.close(read)
        os.close(write)


def _serve(*extra: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "host.cli", "mcp", *extra],
        stdin=subprocess.PIPE,  # kept open: only a signal can end it
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=child_env(),
    )


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
async def test_it_says_what_it_serves_and_a_signal_stops_it_and_its_servers(
    tmp_path: Path, sig: signal.Signals
) -> None:
    pidfile = tmp_path / "demo.pid"
    config = tmp_path / "mcp.json"
    demo = {"command": sys.executable, "args": [str(DEMO)], "env": {"DEMO_PIDFILE": str(pidfile)}}
    config.write_text(json.dumps({"mcpServers": {"demo": demo}}))
    process = _serve("-b", str(BINDINGS), "--mcp-config", str(config))
    try:
        assert process.stderr is not None
        line = process.stderr.readline().decode()
        assert line.startswith("dsh-code mcp: serving run_code over ")
        assert "stdio" in line and "Ctrl-C" in line
        server = int(pidfile.read_text())
        assert pid_alive(server)
        process.send_signal(sig)
        out, err = process.communicate(timeout=20)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert process.returncode == 0, err
    assert out == b""  # nothing but MCP on stdout, and no MCP was asked for
    assert b"Traceback" not in err
    assert wait_gone(server)


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_what_the_bindings_print_never_reaches_the_channel(tmp_path: Path) -> None:
    noisy = tmp_path / "noisy.py"
    noisy.write_text(NOISY)
    errlog = (tmp_path / "stderr").open("w")
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "host.cli", "mcp", "-b", str(noisy)], env=child_env()
    )
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", MCPDeprecationWarning)
            client = Client(stdio_client(params, errlog=errlog), cache=None)
        async with client:
            result = await client.call_tool(
                "run_code", {"code": "return await tools.add(a=2, b=3)"}
            )
            assert result.structured_content == {"logs": [], "result": 5}
    finally:
        errlog.close()
    text = (tmp_path / "stderr").read_text()
    for printed in ("printed at import", "from a subprocess at import", "printed inside the tool"):
        assert printed in text
    assert "Failed to parse" not in text
