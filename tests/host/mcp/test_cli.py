"""``dsh-code run|sdk|tools|check`` with ``--mcp`` and ``--mcp-config``: real stdio servers."""

from __future__ import annotations

import json
import socket
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from host.cli._app import app

from .support import BINDINGS, DEMO, FAULTY, demo_option, faulty_option

pytestmark = pytest.mark.timeout(60)
runner = CliRunner()

PROGRAM = """
import asyncio
total = await tools.mcp__demo__add(a=20, b=22)
product = await tools.multiply(a=6, b=7)
print("sum", total["total"])
secret = await tools.mcp__demo__env_value(name="DEMO_SECRET")
outcomes = {}
for name in ("hang", "crash", "ping"):
    try:
        outcomes[name] = await getattr(tools, "mcp__faulty__" + name)()
    except ToolCallError as exc:
        outcomes[name] = exc.code
pixel = await tools.mcp__demo__pixel()
return {"total": total, "product": product, "secret": secret["result"],
        "outcomes": outcomes, "pixel": [part["type"] for part in pixel]}
"""


def _write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_run_calls_mcp_tools_and_survives_a_hung_and_a_crashed_server(tmp_path: Path) -> None:
    config = _write(
        tmp_path,
        "mcp.json",
        json.dumps(
            {
                "mcpServers": {
                    "demo": {
                        "command": sys.executable,
                        "args": [str(DEMO)],
                        "env": {"DEMO_SECRET": "from-config"},
                    }
                }
            }
        ),
    )
    program = _write(tmp_path, "prog.py", PROGRAM)
    result = runner.invoke(
        app,
        [
            "run", str(program), "--json", "-b", str(BINDINGS), "--mcp-config", str(config),
            "--mcp", faulty_option(), "--mcp-timeout-ms", "1000",
        ],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert out["logs"] == ["sum 42"]
    assert out["value"] == {
        "total": {"total": 42, "terms": [20, 22]},
        "product": 42,
        "secret": "from-config",
        "outcomes": {"hang": "TOOL_TIMEOUT", "crash": "TOOL_ERROR", "ping": "TOOL_ERROR"},
        "pixel": ["text", "image"],
    }


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["--mcp", "no-equals-sign"], "--mcp takes NAME=COMMAND"),
        (["--mcp", "x='unclosed"], "cannot split the command"),
        (
            ["--mcp", f"faulty={sys.executable} {FAULTY} refuse"],
            "refusing to start (missing API key)",
        ),
        (["--mcp", "ghost=/nonexistent/mcp-server"], "did not start"),
        (["--mcp-config", "/nonexistent/mcp.json"], "cannot read the MCP config"),
    ],
)
def test_bad_mcp_values_and_dead_servers_exit_2_with_a_message(
    tmp_path: Path, args: list[str], fragment: str
) -> None:
    program = _write(tmp_path, "prog.py", "return 1")
    result = runner.invoke(app, ["run", str(program), *args])
    assert result.exit_code == 2, result.output
    assert fragment in result.stderr
    assert "Traceback" not in result.output


def test_sdk_tools_and_check_see_the_mcp_tools(tmp_path: Path) -> None:
    sdk = runner.invoke(app, ["sdk", "--mcp", demo_option()])
    assert sdk.exit_code == 0, sdk.output
    assert "async def mcp__demo__add(*, a: int, b: int" in sdk.stdout
    assert "class McpDemoAddResult(TypedDict):" in sdk.stdout  # the real output schema

    listed = runner.invoke(app, ["tools", "--mcp", demo_option(), "-b", str(BINDINGS)])
    assert listed.exit_code == 0, listed.output
    names = [entry["name"] for entry in json.loads(listed.stdout)]
    assert "mcp__demo__pixel" in names and "multiply" in names

    program = _write(tmp_path, "prog.py", 'x = await tools.mcp__demo__add(a="one", b=2)\n')
    checked = runner.invoke(app, ["check", str(program), "--mcp", demo_option()])
    assert checked.exit_code == 1, checked.output
    assert "mcp__demo__add" in checked.stdout


def test_a_missing_mcp_package_names_the_extra(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "mcp", None)  # import mcp -> ImportError
    program = _write(tmp_path, "prog.py", "return 1")
    result = runner.invoke(app, ["run", str(program), "--mcp", demo_option()])
    assert result.exit_code == 2
    assert "pip install 'dsh-code[mcp]'" in result.stderr
    served = runner.invoke(app, ["mcp", "-b", str(BINDINGS)])
    assert served.exit_code == 2
    assert "pip install 'dsh-code[mcp]'" in served.stderr
    plain = runner.invoke(app, ["run", str(program), "--json"])  # no MCP flag: unaffected
    assert plain.exit_code == 0 and json.loads(plain.stdout)["value"] == 1


def test_mcp_command_usage_errors() -> None:
    bare = runner.invoke(app, ["mcp"])
    assert bare.exit_code == 2 and "needs tools" in bare.stderr
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        busy = runner.invoke(app, ["mcp", "-b", str(BINDINGS), "--http", str(port)])
    assert busy.exit_code == 2, busy.output
    assert f"cannot serve on 127.0.0.1:{port}" in busy.stderr
    assert "Traceback" not in busy.output
