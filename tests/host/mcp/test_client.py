"""MCP servers as bindings: real stdio servers, their tools through the registry's pipeline."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import anyio
import pytest

from host.mcp import (
    McpConfigError,
    McpServerError,
    McpServers,
    McpServerSpec,
    load_mcp_config,
    parse_mcp_option,
    tool_name,
)
from host.tools import ToolRegistry

from .support import DEMO, FAULTY, TRACED, pid_alive, wait_gone

pytestmark = pytest.mark.timeout(60)


def _demo(pidfile: Path | None = None) -> McpServerSpec:
    env = {"DEMO_SECRET": "s3", "DEMO_PIDFILE": str(pidfile or "")}
    return McpServerSpec("demo", sys.executable, (str(DEMO),), env=env)


def _faulty(mode: str = "ok") -> McpServerSpec:
    return McpServerSpec("faulty", sys.executable, (str(FAULTY), mode))


@pytest.mark.anyio
async def test_tools_run_through_the_pipeline_and_faults_become_tool_errors(
    tmp_path: Path,
) -> None:
    registry = ToolRegistry()
    pidfile = tmp_path / "demo.pid"
    hub = McpServers([_demo(pidfile), _faulty()], call_timeout_ms=1_500)
    async with hub:
        hub.register(registry)
        manifest = {entry["name"]: entry for entry in registry.manifest()}
        assert set(manifest) == {
            "mcp__demo__add", "mcp__demo__echo", "mcp__demo__env_value", "mcp__demo__fail",
            "mcp__demo__pixel", "mcp__faulty__crash", "mcp__faulty__hang", "mcp__faulty__ping",
        }  # fmt: skip
        add = manifest["mcp__demo__add"]
        assert add["description"] == "Add two integers."
        assert add["parameters"]["properties"] == {  # the server's schema, as given
            "a": {"title": "A", "type": "integer"},
            "b": {"title": "B", "type": "integer"},
        }
        assert add["parameters"]["required"] == ["a", "b"]
        assert add["output"]["properties"]["total"] == {"title": "Total", "type": "integer"}

        result = await registry.invoke("mcp__demo__add", {"a": 2, "b": 40})
        assert result.to_dict()["value"] == {"total": 42, "terms": [2, 40]}
        assert json.loads(result.content[0]["text"]) == {"total": 42, "terms": [2, 40]}

        bad = await registry.invoke("mcp__demo__add", {"a": "two", "b": 1})
        assert bad.code == "INVALID_ARGS"  # checked against the server's schema before the call

        env = await registry.invoke("mcp__demo__env_value", {"name": "DEMO_SECRET"})
        assert env.to_dict()["value"] == {"result": "s3"}

        pixel = await registry.invoke("mcp__demo__pixel", {})
        parts = pixel.to_dict()["content"]
        assert [p["type"] for p in parts] == ["text", "image"]
        assert parts[1]["mime_type"] == "image/png" and parts[1]["data"].startswith("iVBOR")

        failed = await registry.invoke("mcp__demo__fail", {"reason": "testing"})
        assert failed.code == "TOOL_ERROR"
        assert failed.error is not None and "failed on purpose: testing" in failed.error.message

        started = time.monotonic()
        hung = await registry.invoke("mcp__faulty__hang", {})
        assert hung.code == "TOOL_TIMEOUT"
        assert 1.4 < time.monotonic() - started < 10
        with anyio.move_on_after(0.3):  # a caller's cancellation leaves the session usable
            await registry.invoke("mcp__faulty__hang", {})

        assert (await registry.invoke("mcp__faulty__ping", {})).to_dict()["value"] == {
            "result": "pong"
        }
        crashed = await registry.invoke("mcp__faulty__crash", {})
        assert crashed.code == "TOOL_ERROR"
        assert crashed.error is not None
        assert "MCP server 'faulty'" in crashed.error.message
        assert "faulty: crashing now" in crashed.error.message  # its stderr, for the reader
        after = await registry.invoke("mcp__faulty__ping", {})
        assert after.code == "TOOL_ERROR"
        # the other server is unaffected
        assert (await registry.invoke("mcp__demo__add", {"a": 1, "b": 1})).is_error is False
        demo_pid = int(pidfile.read_text())
        assert pid_alive(demo_pid)
        started = time.monotonic()
    assert time.monotonic() - started < 15  # shutdown is bounded (10 s), even with a hung call
    assert wait_gone(demo_pid, timeout=5)  # and it stopped the servers


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
@pytest.mark.anyio
async def test_servers_that_do_not_start_are_clear_errors() -> None:
    started = time.monotonic()
    with pytest.raises(McpServerError) as refused:
        async with McpServers([_faulty("refuse")]):
            pass
    message = str(refused.value)
    assert "MCP server 'faulty'" in message and "did not start" in message
    assert "refusing to start (missing API key)" in message

    with pytest.raises(McpServerError, match="did not list its tools within 1 s"):
        async with McpServers([_faulty("mute")], start_timeout_ms=1_000):
            pass

    with pytest.raises(McpServerError, match="No such file"):
        async with McpServers([McpServerSpec("ghost", "/nonexistent/mcp-server")]):
            pass
    assert time.monotonic() - started < 20


def test_mcp_option_and_config_parsing(tmp_path: Path) -> None:
    spec = parse_mcp_option("fs=npx -y '@scope/server files' /tmp")
    assert (spec.name, spec.command, spec.args) == (
        "fs",
        "npx",
        ("-y", "@scope/server files", "/tmp"),
    )
    for bad in ("no-equals", "=cmd", "x=", "x='unclosed", "bad name=cmd", "a__b=cmd"):
        with pytest.raises(McpConfigError):
            parse_mcp_option(bad)

    config = tmp_path / "mcp.json"
    config.write_text(
        json.dumps(
            {
                "mcpServers": {
                    "one": {"command": "srv", "args": ["--x"], "env": {"K": "V"}},
                    "off": {"command": "srv", "disabled": True},
                }
            }
        )
    )
    (only,) = load_mcp_config(config)
    assert (only.name, only.command, only.args, dict(only.env or {})) == (
        "one", "srv", ("--x",), {"K": "V"},
    )  # fmt: skip
    for text, fragment in [
        ("{", "not JSON"),
        ("{}", "no 'mcpServers'"),
        ('{"mcpServers": {"w": {"url": "http://x"}}}', "only stdio servers"),
        ('{"mcpServers": {"w": {"command": "c", "args": "x"}}}', "args must be a list"),
    ]:
        config.write_text(text)
        with pytest.raises(McpConfigError, match=fragment):
            load_mcp_config(config)
    with pytest.raises(McpConfigError, match="unique"):
        McpServers([parse_mcp_option("a=x"), parse_mcp_option("a=y")])


def test_tool_names_are_valid_and_unique() -> None:
    assert tool_name("fs", "read_file") == "mcp__fs__read_file"
    assert tool_name("fs", "files/read.v2") == "mcp__fs__files_read_v2"
    long = tool_name("server", "x" * 80)
    assert len(long) == 64 and long.startswith("mcp__server__xxx")
    taken = {"mcp__fs__a_b"}
    other = tool_name("fs", "a.b", taken)
    assert other != "mcp__fs__a_b" and other.startswith("mcp__fs__a_b_")


@pytest.mark.anyio
async def test_a_call_sends_its_execute_tool_span_as_the_trace_context_in_meta() -> None:
    from host.codemode import CodeMode
    from host.sandbox import SubprocessRuntime
    from tests.host.telemetry.support import Recorded

    spec = McpServerSpec("traced", sys.executable, (str(TRACED),))
    registry = ToolRegistry()
    with Recorded() as recorded:
        async with McpServers([spec]) as hub, SubprocessRuntime(prefork=0) as runtime:
            hub.register(registry)
            result = await CodeMode(registry, runtime).run(
                "return (await tools.mcp__traced__traceparent())['result']"
            )
        assert result.value is not None
        sent = result.value["result"]
        (call,) = recorded.children(recorded.run())
    assert call.name == "execute_tool mcp__traced__traceparent"
    context = call.get_span_context()
    assert context is not None
    # the MCP SDK's own client span records nothing here (no global provider): it passes
    # the current span, ours, through to _meta
    assert sent.startswith(f"00-{context.trace_id:032x}-{context.span_id:016x}-")
