"""``dsh-code mcp`` as a real subprocess, driven by the ``mcp`` SDK's client and the TypeScript one."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import time
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPDeprecationWarning
from mcp.types import LoggingMessageNotificationParams

from host.cli._options import MCP_WALL_MS

from .support import BINDINGS, DEMO, ROOT, child_env, pid_alive, wait_gone

pytestmark = [
    pytest.mark.timeout(60),
    pytest.mark.parametrize("anyio_backend", ["asyncio"]),  # uvicorn and the SDK's HTTP client
    pytest.mark.anyio,
]

SLOW_LOGS = """
import asyncio
print("first")
await asyncio.sleep(1.5)
print("second")
return await tools.multiply(a=6, b=7)
"""


class _Logs:
    """Log notifications as they arrive, with their arrival times."""

    def __init__(self) -> None:
        self.items: list[tuple[float, Any]] = []

    async def __call__(self, params: LoggingMessageNotificationParams) -> None:
        self.items.append((time.monotonic(), params.data))


def _client(server: Any, logs: _Logs) -> Client:
    with warnings.catch_warnings():
        # The SDK marks the logging capability deprecated from protocol 2026-07-28 on;
        # log notifications are still how a running program's output reaches the client.
        warnings.simplefilter("ignore", MCPDeprecationWarning)
        return Client(server, logging_callback=logs, log_level="debug", cache=None)


def _client_in(server: Any, mode: str) -> Client:
    """A client of ``server`` negotiating ``mode`` ("legacy": the handshake and MCP sessions)."""
    return Client(server, mode=mode, cache=None)


def _command(*extra: str) -> list[str]:
    return [sys.executable, "-m", "host.cli", "mcp", "-b", str(BINDINGS), *extra]


async def test_stdio_run_code_schemas_and_streamed_logs(tmp_path: Path) -> None:
    logs = _Logs()
    pidfile = tmp_path / "demo.pid"
    config = tmp_path / "mcp.json"
    servers = {
        "demo": {
            "command": sys.executable,
            "args": [str(DEMO)],
            "env": {"DEMO_PIDFILE": str(pidfile)},
        }
    }
    config.write_text(json.dumps({"mcpServers": servers}))
    command = _command("--mcp-config", str(config))
    params = StdioServerParameters(command=command[0], args=command[1:], env=child_env())
    async with _client(stdio_client(params), logs) as client:
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
        assert set(tools) == {
            "run_code",
            "get_tool_schema",
            "list_tools",
            "reset_session",
            "resume_run",
        }
        description = tools["run_code"].description or ""
        assert "async def multiply(*, a: int, b: int) -> int:" in description  # the SDK section
        assert "async def mcp__demo__add(" in description  # MCP tools behind MCP
        assert tools["run_code"].input_schema["required"] == ["code"]

        result = await client.call_tool("run_code", {"code": SLOW_LOGS})
        finished = time.monotonic()
        assert result.is_error is False
        assert result.structured_content == {"logs": ["first", "second"], "result": 42}
        text = result.content[0].text  # type: ignore[union-attr]
        assert text == "logs:\nfirst\nsecond\nresult:\n42"
        assert [data for _, data in logs.items] == ["first", "second"]
        first_at = logs.items[0][0]
        assert finished - first_at > 0.5  # streamed while the program ran, not at the end

        mixed = await client.call_tool(
            "run_code",
            {"code": "a = await tools.mcp__demo__add(a=1, b=2)\nreturn a['total'] * 10"},
        )
        assert mixed.structured_content == {"logs": [], "result": 30}

        shown = await client.call_tool("run_code", {"code": "s = {1, 2}\ns"})
        assert shown.structured_content == {"logs": [], "result": "{1, 2}", "result_is_repr": True}
        assert shown.content[0].text == "result (repr, not JSON):\n{1, 2}"  # type: ignore[union-attr]

        failed = await client.call_tool("run_code", {"code": "print('so far')\n\n1 / 0"})
        assert failed.is_error is True
        facts = failed.structured_content or {}
        assert facts["code"] == "CODE_RUN_FAILED"
        assert facts["code_run"]["kind"] == "exception"
        assert facts["code_run"]["lineno"] == 3
        assert facts["code_run"]["logs"] == ["so far"]
        assert "ZeroDivisionError" in failed.content[0].text  # type: ignore[union-attr]

        schema = await client.call_tool("get_tool_schema", {"name": "mcp__demo__add"})
        entry = json.loads(schema.content[0].text)  # type: ignore[union-attr]
        assert entry["parameters"]["properties"]["a"] == {"title": "A", "type": "integer"}
        assert entry["output"]["properties"]["terms"]["items"] == {"type": "integer"}
        unknown = await client.call_tool("get_tool_schema", {"name": "nope"})
        assert unknown.is_error is True

        listed = await client.call_tool("list_tools", {"query": "multiply"})
        assert listed.content[0].text == "multiply: Multiply two integers."  # type: ignore[union-attr]
        demo_pid = int(pidfile.read_text())
        assert pid_alive(demo_pid)
    assert wait_gone(demo_pid)  # the client closed dsh-code mcp, which stopped its server


async def test_a_run_past_the_models_budget_reads_cut_and_its_whole_text_is_a_resource() -> None:
    from mcp.shared.exceptions import MCPError

    command = _command("--max-model-output-bytes", "2000")
    params = StdioServerParameters(command=command[0], args=command[1:], env=child_env())
    async with Client(stdio_client(params), cache=None) as client:
        program = "for i in range(5000):\n    print('line', i)\nreturn {'n': 5000}"
        result = await client.call_tool("run_code", {"code": program})
        text = result.content[0].text  # type: ignore[union-attr]
        assert result.is_error is False and len(text.encode()) <= 2000
        assert text.startswith("logs:\nline 0\n") and text.endswith(
            'line 4999\nresult:\n{"n":5000}'
        )
        found = re.search(
            r"of the logs left out here; the whole text: the MCP resource (\S+)\]", text
        )
        assert found is not None
        uri = found.group(1)
        link = result.content[1]
        assert link.type == "resource_link" and str(link.uri) == uri
        cut = (result.structured_content or {})["cut"]
        assert cut["resource"] == uri and cut["parts"] == ["logs"] and cut["bytes"] > 40_000
        assert "logs" not in (result.structured_content or {})  # bounded, as the text is
        whole = (await client.read_resource(uri)).contents[0].text  # type: ignore[union-attr]
        assert whole.startswith("logs:\nline 0\n") and whole.count("\n") == 5002
        with pytest.raises(MCPError, match="no output kept at"):
            await client.read_resource("dsh-code://output/not-one-of-ours")
        assert (await client.list_resources()).resources == []  # read by the URI given, only


TOKEN = "test-token-0123456789abcdef"


@pytest.fixture
def http_server() -> Iterator[str]:
    process = subprocess.Popen(
        _command("--http", "0"),  # an ephemeral port on 127.0.0.1
        env={**child_env(), "DSH_CODE_MCP_TOKEN": TOKEN},
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stderr is not None
        line = process.stderr.readline()  # "dsh-code mcp: serving on http://127.0.0.1:PORT/mcp"
        assert "serving on http://127.0.0.1:" in line, line
        found = re.search(r"http://127\.0\.0\.1:(\d+)/mcp", line)
        assert found is not None and int(found.group(1)) > 0, line
        yield found.group(0)
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        if process.stderr is not None:
            process.stderr.close()


def _http(url: str, token: str | None = TOKEN) -> Any:
    headers = {"Authorization": f"Bearer {token}"} if token is not None else {}
    return httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30, read=300))


async def test_streamable_http_on_localhost(http_server: str) -> None:
    logs = _Logs()
    async with (
        _http(http_server) as http,
        _client(streamable_http_client(http_server, http_client=http), logs) as client,
    ):
        names = {tool.name for tool in (await client.list_tools()).tools}
        assert "run_code" in names
        result = await client.call_tool(
            "run_code", {"code": "print('over http')\nreturn await tools.greet(name='mcp')"}
        )
        facts = dict(result.structured_content or {})
        handle = facts.pop("session")  # 2026-07-28 over HTTP: no MCP session, so a handle
        assert isinstance(handle, str) and len(handle) >= 16
        assert facts == {"logs": ["over http"], "result": "hello, mcp!"}
        assert [data for _, data in logs.items] == ["over http"]


def _stdio(*extra: str) -> Any:
    command = _command(*extra)
    return stdio_client(
        StdioServerParameters(command=command[0], args=command[1:], env=child_env())
    )


async def test_a_long_run_sends_progress_and_a_runaway_fails_as_budget() -> None:
    seen: list[tuple[float, float | None, str | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, total, message))

    async with _client(_stdio(), _Logs()) as client:
        result = await client.call_tool(
            "run_code",
            {"code": "import time\ntime.sleep(2.6)\nreturn 1"},
            progress_callback=on_progress,
        )
        assert result.structured_content == {"logs": [], "result": 1}
    assert len(seen) >= 2, seen
    assert all(total == 50.0 for _, total, _ in seen)  # the default wall budget, in s
    assert [value for value, _, _ in seen] == sorted(value for value, _, _ in seen)
    assert "compute" in (seen[0][2] or "")

    async with _client(_stdio("--wall-ms", "800"), _Logs()) as client:
        runaway = await client.call_tool("run_code", {"code": "import time\ntime.sleep(30)"})
    assert runaway.is_error is True
    facts = (runaway.structured_content or {})["code_run"]
    assert (facts["kind"], facts["budget"]) == ("budget", "wall")


async def test_a_cancelled_call_stops_the_run() -> None:
    logs = _Logs()
    program = "import os\nprint(os.getcwd(), flush=True)\nimport time\ntime.sleep(60)"
    async with _client(_stdio("--isolation", "process"), logs) as client:
        async with anyio.create_task_group() as group:

            async def call() -> None:
                await client.call_tool("run_code", {"code": program})

            group.start_soon(call)
            with anyio.fail_after(20):
                while not logs.items:  # the program runs: its first line arrived
                    await anyio.sleep(0.02)
            workdir = Path(logs.items[0][1])
            assert workdir.is_dir()
            group.cancel_scope.cancel()  # the client sends notifications/cancelled
        with anyio.fail_after(10):
            while workdir.exists():  # the run was stopped and cleaned up
                await anyio.sleep(0.05)
            quick = await client.call_tool("run_code", {"code": "return 2"})
        assert quick.structured_content == {"logs": [], "result": 2}


async def test_a_log_flood_is_batched_into_few_notifications() -> None:
    logs = _Logs()
    async with _client(_stdio(), logs) as client:
        result = await client.call_tool(
            "run_code", {"code": "for i in range(100_000):\n    print(i)\nreturn 'done'"}
        )
        # The model reads a head and a tail; the whole text, every line, is a resource.
        assert result.content[0].text.endswith('99999\nresult:\n"done"')  # type: ignore[union-attr]
        uri = (result.structured_content or {})["cut"]["resource"]
        whole = (await client.read_resource(uri)).contents[0].text  # type: ignore[union-attr]
        assert whole.split("\n")[1:100_001] == [str(i) for i in range(100_000)]
    # not one notification per line (100 000 before batching); how many lines each one joins
    # depends on how the host's reads and the client's sends interleave under load
    assert len(logs.items) < 5_000
    forwarded = "\n".join(str(data) for _, data in logs.items).split("\n")
    assert forwarded[:3] == ["0", "1", "2"]
    assert forwarded[-1] == "99999" or "not forwarded" in forwarded[-1]


CLIENT = Path(__file__).with_name("ts_client.mjs")
SDK = ROOT / "node_modules" / "@modelcontextprotocol" / "sdk"


@pytest.mark.timeout(90)
@pytest.mark.skipif(
    shutil.which("node") is None or not SDK.is_dir(),
    reason="needs node and npm's @modelcontextprotocol/sdk (scripts/setup installs them)",
)
async def test_the_typescript_sdk_client_gets_a_budget_failure_before_its_timeout() -> None:
    """The official TypeScript MCP SDK's client (npm) over stdio: ``tests/host/mcp/ts_client.mjs``."""
    with anyio.fail_after(80):
        done = await anyio.run_process(
            ["node", str(CLIENT), sys.executable, str(BINDINGS), "2500"],
            cwd=ROOT,
            env=child_env(),
            check=False,
        )
    assert done.returncode == 0, done.stderr.decode()
    seen = json.loads(done.stdout)
    assert seen["defaultTimeoutMs"] > MCP_WALL_MS  # our default budget ends first
    assert seen["tools"] == [
        "get_tool_schema",
        "list_tools",
        "reset_session",
        "resume_run",
        "run_code",
    ]
    runaway = seen["runaway"]
    assert runaway["isError"] is True
    facts = runaway["structuredContent"]["code_run"]
    assert (facts["kind"], facts["budget"]) == ("budget", "wall")
    assert len(seen["progress"]) >= 1  # the client's token got progress while it ran
    assert seen["progress"][0]["total"] == 2.5
    assert seen["quick"]["structuredContent"] == {"logs": [], "result": 42}
    assert seen["stderr"].startswith("dsh-code mcp: serving run_code over ")


STEP_ONE = """
import functools
x = 20
def add_x(n):
    return n + x
@functools.lru_cache
def double(n):
    return 2 * n
class Box:
    def __init__(self, v):
        self.v = v
box = Box(await tools.multiply(a=3, b=7))
"""


async def test_each_stdio_client_has_its_own_session_and_can_reset_it() -> None:
    async with _client(_stdio(), _Logs()) as first, _client(_stdio(), _Logs()) as second:
        tools = {tool.name: tool for tool in (await first.list_tools()).tools}
        assert set(tools) == {
            "run_code",
            "get_tool_schema",
            "list_tools",
            "reset_session",
            "resume_run",
        }
        assert "persist from one `run_code` call to the next" in (
            tools["run_code"].description or ""
        )
        assert (
            "session" not in tools["run_code"].input_schema["properties"]
        )  # the pipe is the session

        one = await first.call_tool("run_code", {"code": STEP_ONE})
        assert one.is_error is False, one.content
        two = await first.call_tool("run_code", {"code": "return [add_x(1), double(21), box.v]"})
        assert two.structured_content == {"logs": [], "result": [21, 42, 21]}
        other = await second.call_tool("run_code", {"code": "return 'x' in globals()"})
        assert other.structured_content == {"logs": [], "result": False}  # a new client: empty

        failed = await first.call_tool("run_code", {"code": "x = 99\n1 / 0"})
        assert failed.is_error is True
        kept = await first.call_tool("run_code", {"code": "return x"})
        assert kept.structured_content == {"logs": [], "result": 20}  # a failed run changed nothing

        dropped = await first.call_tool("run_code", {"code": "gen = (i for i in range(3))"})
        facts = dropped.structured_content or {}
        assert set(facts["state_dropped"]) == {"gen"}
        assert "not carried to the next call" in dropped.content[0].text  # type: ignore[union-attr]

        reset = await first.call_tool("reset_session", {})
        assert reset.is_error is False
        empty = await first.call_tool("run_code", {"code": "return 'x' in globals()"})
        assert empty.structured_content == {"logs": [], "result": False}


async def test_http_clients_get_independent_sessions(http_server: str) -> None:
    async with (
        _http(http_server) as http_a,
        _http(http_server) as http_b,
        _client_in(streamable_http_client(http_server, http_client=http_a), "legacy") as a,
        _client_in(streamable_http_client(http_server, http_client=http_b), "legacy") as b,
    ):
        assert (await a.call_tool("run_code", {"code": "who = 'a'"})).is_error is False
        assert (await b.call_tool("run_code", {"code": "who = 'b'"})).is_error is False
        seen_a = await a.call_tool("run_code", {"code": "return who"})
        seen_b = await b.call_tool("run_code", {"code": "return who"})
        assert (seen_a.structured_content or {})["result"] == "a"
        assert (seen_b.structured_content or {})["result"] == "b"


async def test_http_without_mcp_sessions_carries_a_session_handle(http_server: str) -> None:
    async with (
        _http(http_server) as http,
        _client_in(streamable_http_client(http_server, http_client=http), "auto") as client,
    ):
        assert client.protocol_version == "2026-07-28"  # no Mcp-Session-Id on this protocol
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
        assert "session" in tools["run_code"].input_schema["properties"]
        first = await client.call_tool("run_code", {"code": "n = 5"})
        handle = (first.structured_content or {})["session"]
        assert isinstance(handle, str) and handle in first.content[0].text  # type: ignore[union-attr]
        again = await client.call_tool("run_code", {"code": "return n + 1", "session": handle})
        assert (again.structured_content or {})["result"] == 6
        fresh = await client.call_tool("run_code", {"code": "return 'n' in globals()"})
        assert (fresh.structured_content or {})["result"] is False
        assert (fresh.structured_content or {})["session"] != handle
        await client.call_tool("reset_session", {"session": handle})
        after = await client.call_tool(
            "run_code", {"code": "return 'n' in globals()", "session": handle}
        )
        assert (after.structured_content or {})["result"] is False
        unknown = await client.call_tool("run_code", {"code": "1", "session": "nope"})
        assert unknown.is_error is True
        assert "no session" in unknown.content[0].text  # type: ignore[union-attr]


async def test_call_style_and_preload_reach_the_served_runs() -> None:
    async with _client(_stdio("--call-style", "sync", "--preload", "colorsys"), _Logs()) as client:
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
        description = tools["run_code"].description or ""
        assert "def multiply(*, a: int, b: int) -> int:" in description
        assert "async def multiply" not in description
        result = await client.call_tool(
            "run_code",
            {"code": "import sys\nreturn [tools.multiply(a=6, b=7), 'colorsys' in sys.modules]"},
        )
        assert result.structured_content == {"logs": [], "result": [42, True]}
