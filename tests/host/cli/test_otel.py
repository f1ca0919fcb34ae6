"""``--otel`` of ``dsh-code run`` and ``dsh-code mcp``: OTLP/HTTP to a real loopback receiver."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client
from opentelemetry.sdk.trace import TracerProvider
from typer.testing import CliRunner

from host.cli._app import app
from tests.host.cli.support import cli, env, run
from tests.host.telemetry.support import OtlpReceiver, Received

pytestmark = pytest.mark.timeout(90)

BINDINGS = '''
from host.tools import tool

@tool(concurrency_safe=True)
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b
'''
PROGRAM = "import asyncio\nprint('adding')\nreturn await asyncio.gather(tools.add(a=1, b=2), tools.add(a=3, b=4))\n"
PARENT_TRACE = "0af7651916cd43dd8448eb211c80319c"
PARENT_SPAN = "b7ad6b7169203331"


@pytest.fixture
def receiver() -> Iterator[tuple[OtlpReceiver, Received]]:
    found = OtlpReceiver()
    with found as received:
        yield found, received


@pytest.fixture
def files(tmp_path: Path) -> tuple[Path, Path]:
    bindings, program = tmp_path / "tools.py", tmp_path / "prog.py"
    bindings.write_text(BINDINGS)
    program.write_text(PROGRAM)
    return bindings, program


def _named(spans: list[dict[str, Any]], name: str) -> list[dict[str, Any]]:
    return [s for s in spans if s["name"] == name]


def test_run_otel_exports_the_run_in_the_trace_traceparent_names(
    receiver: tuple[OtlpReceiver, Received], files: tuple[Path, Path]
) -> None:
    otlp, received = receiver
    bindings, program = files
    done = run(
        "run",
        str(program),
        "--bindings",
        str(bindings),
        "--otel",
        env=env(
            OTEL_EXPORTER_OTLP_ENDPOINT=otlp.endpoint,
            TRACEPARENT=f"00-{PARENT_TRACE}-{PARENT_SPAN}-01",
        ),
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == "adding\n[\n  3,\n  7\n]\n"
    spans = received.spans()
    (span,) = _named(spans, "dsh_code.run")
    assert (span["trace_id"], span["parent_id"]) == (PARENT_TRACE, PARENT_SPAN)
    assert span["service"] == "dsh-code"
    attributes = span["attributes"]
    assert attributes["dsh_code.run.outcome"] == "ok"
    assert attributes["dsh_code.run.calls"] == 2
    assert "dsh_code.program" not in attributes and "dsh_code.logs" not in attributes
    calls = _named(spans, "execute_tool add")
    assert [c["parent_id"] for c in calls] == [span["span_id"]] * 2
    assert {c["attributes"]["gen_ai.tool.call.id"] for c in calls} == {
        f"{attributes['dsh_code.run.id']}:{n}" for n in (1, 2)
    }
    assert {"dsh_code.runs", "dsh_code.run.duration", "dsh_code.tool_call.duration"} <= (
        received.metric_names()
    )


def test_the_variables_alone_export_and_capture_is_opt_in(
    receiver: tuple[OtlpReceiver, Received], files: tuple[Path, Path]
) -> None:
    otlp, received = receiver
    bindings, program = files
    done = run(
        "run",
        str(program),
        "-b",
        str(bindings),
        "--otel-capture",
        "program,logs",
        env=env(OTEL_EXPORTER_OTLP_ENDPOINT=otlp.endpoint, OTEL_SERVICE_NAME="agent"),
    )
    assert done.returncode == 0, done.stderr
    (span,) = _named(received.spans(), "dsh_code.run")
    assert span["service"] == "agent"
    assert span["attributes"]["dsh_code.program"] == PROGRAM
    assert span["attributes"]["dsh_code.logs"] == "adding"
    assert "dsh_code.result" not in span["attributes"]


runner = CliRunner()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--otel-capture", "passwords"], "--otel-capture: unknown 'passwords' (one of program,"),
        (["--otel-capture", "program"], "--otel-capture needs --otel"),
    ],
)
def test_bad_otel_flags_are_usage_errors(
    args: list[str], message: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_TRACES_EXPORTER", "OTEL_METRICS_EXPORTER"):
        monkeypatch.delenv(name, raising=False)
    result = runner.invoke(app, ["run", "-", *args], input="1")
    assert result.exit_code == 2
    assert message in result.output


def test_otel_without_the_extra_is_a_usage_error_and_the_variables_only_a_warning(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # as if the otel extra were not installed: its last import fails (nothing is set up)
    monkeypatch.setitem(sys.modules, "opentelemetry.sdk.trace.export", None)
    result = runner.invoke(app, ["run", "-", "--otel"], input="return 1")
    assert result.exit_code == 2
    assert "--otel: OTLP export needs the otel extra: pip install 'dsh-code[otel]'" in (
        result.output
    )
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:9")
    result = runner.invoke(app, ["run", "-"], input="return 1")
    assert result.exit_code == 0
    assert "the OTEL_* variables are ignored: OTLP export needs the otel extra" in result.output


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_mcp_otel_joins_the_clients_trace_through_meta(
    receiver: tuple[OtlpReceiver, Received], files: tuple[Path, Path]
) -> None:
    otlp, received = receiver
    bindings, _ = files
    command = cli("mcp", "-b", str(bindings), "--otel")
    params = StdioServerParameters(
        command=command[0],
        args=command[1:],
        env=env(OTEL_EXPORTER_OTLP_ENDPOINT=otlp.endpoint),
    )
    tracer = TracerProvider().get_tracer("agent")  # the client's own, not global
    with tracer.start_as_current_span("agent step") as step:
        async with Client(stdio_client(params), cache=None) as client:
            result = await client.call_tool("run_code", {"code": PROGRAM})
    assert result.structured_content == {"logs": ["adding"], "result": [3, 7]}
    spans = received.spans()  # the server flushed them as it exited
    context = step.get_span_context()
    (served,) = _named(spans, "tools/call run_code")
    assert served["scope"] == "mcp-python-sdk"
    # the MCP SDK sent the client's current span as _meta.traceparent
    assert (served["trace_id"], served["parent_id"]) == (
        f"{context.trace_id:032x}",
        f"{context.span_id:016x}",
    )
    (span,) = _named(spans, "dsh_code.run")
    assert span["parent_id"] == served["span_id"] and span["trace_id"] == served["trace_id"]
    assert [c["parent_id"] for c in _named(spans, "execute_tool add")] == [span["span_id"]] * 2


def test_a_run_calling_dsh_code_mcp_is_one_trace_across_both_processes(
    receiver: tuple[OtlpReceiver, Received], files: tuple[Path, Path], tmp_path: Path
) -> None:
    otlp, received = receiver
    bindings, _ = files
    # an MCP server gets only the variables its config names (the SDK's rule)
    command = cli("mcp", "-b", str(bindings), "--otel")
    server = {
        "command": command[0],
        "args": command[1:],
        "env": {"OTEL_EXPORTER_OTLP_ENDPOINT": otlp.endpoint, "OTEL_SERVICE_NAME": "inner"},
    }
    config = tmp_path / "mcp.json"
    config.write_text(json.dumps({"mcpServers": {"inner": server}}))
    program = tmp_path / "outer.py"
    program.write_text(
        "out = await tools.mcp__inner__run_code(code='return await tools.add(a=20, b=22)')\n"
        "return out['result']\n"
    )
    done = run(
        "run",
        str(program),
        "--mcp-config",
        str(config),
        "--otel",
        env=env(OTEL_EXPORTER_OTLP_ENDPOINT=otlp.endpoint),
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == "42\n"
    spans = received.spans()
    by_id = {s["span_id"]: s for s in spans}

    def chain(span: dict[str, Any]) -> list[str]:
        names = []
        while span is not None:
            names.append(span["name"])
            span = by_id.get(span["parent_id"])  # type: ignore[assignment]
        return names

    (innermost,) = _named(spans, "execute_tool add")
    assert chain(innermost) == [
        "execute_tool add",
        "dsh_code.run",  # in the server
        "tools/call run_code",  # the server's MCP span, from _meta
        "MCP send tools/call run_code",  # the client's MCP span, in the outer run
        "execute_tool mcp__inner__run_code",
        "dsh_code.run",  # the outer run
    ]
    # one trace, two processes, each exporting its own part
    assert {s["service"] for s in spans if s["trace_id"] == innermost["trace_id"]} == {
        "dsh-code",
        "inner",
    }
