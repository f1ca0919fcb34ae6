"""``dsh-code run|sdk|tools|check`` with ``--mcp`` and ``--mcp-config``: real stdio servers."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from host.cli._app import app

from .support import BINDINGS, DEMO, FAULTY, child_env, demo_option, faulty_option

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


def test_a_busy_port_is_one_line_saying_so() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        busy = subprocess.run(  # a real process: uvicorn's own log lines would reach stderr
            [sys.executable, "-m", "host.cli", "mcp", "-b", str(BINDINGS), "--http", str(port)],
            check=False,
            env=child_env(),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert busy.returncode == 2, busy.stderr
    assert busy.stderr == f"error: cannot serve on 127.0.0.1:{port}: address already in use\n"
    assert busy.stdout == ""


@pytest.mark.parametrize(
    "flags", [["--token", "t" * 20], ["--token-file", "token.txt"], ["--no-auth"]]
)
def test_auth_flags_without_http_are_a_usage_error(tmp_path: Path, flags: list[str]) -> None:
    (tmp_path / "token.txt").write_text("t" * 20)
    flags = [str(tmp_path / flag) if flag == "token.txt" else flag for flag in flags]
    result = runner.invoke(app, ["mcp", "-b", str(BINDINGS), *flags])
    assert result.exit_code == 2, result.output
    assert result.stderr.splitlines()[-1] == (
        f"error: {flags[0]} needs --http: over stdio the client that starts dsh-code mcp is "
        "its only client, and no token is asked for"
    )


def test_auth_flags_exclude_each_other(tmp_path: Path) -> None:
    token = tmp_path / "token.txt"
    token.write_text("t" * 20)
    result = runner.invoke(
        app, ["mcp", "-b", str(BINDINGS), "--http", "0", "--token-file", str(token), "--no-auth"]
    )
    assert result.exit_code == 2, result.output
    assert result.stderr == "error: --token-file and --no-auth exclude each other\n"


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("short\n", "the bearer token must be at least 16 characters"),
        ("\n\n", "--token-file {path} is empty"),
        (None, "cannot read --token-file {path}: No such file or directory"),
    ],
)
def test_a_bad_token_file_is_a_usage_error(
    tmp_path: Path, content: str | None, message: str
) -> None:
    path = tmp_path / "token.txt"
    if content is not None:
        path.write_text(content)
    result = runner.invoke(
        app, ["mcp", "-b", str(BINDINGS), "--http", "0", "--token-file", str(path)]
    )
    assert result.exit_code == 2, result.output
    assert result.stderr == f"error: {message.format(path=path)}\n"


@pytest.mark.parametrize("command", ["run", "sdk", "tools", "check", "mcp", "repl"])
def test_the_mcp_servers_start_timeout_is_an_option(tmp_path: Path, command: str) -> None:
    program = _write(tmp_path, "prog.py", "return 1")
    args = {"run": [str(program)], "check": [str(program)], "mcp": ["--yes"]}.get(command, [])
    started = time.monotonic()
    result = runner.invoke(
        app,
        [command, *args, "--mcp", faulty_option("mute"), "--mcp-start-timeout-ms", "500"],
    )
    took = time.monotonic() - started
    assert result.exit_code == 2, result.output
    assert "MCP server 'faulty'" in result.stderr
    assert "did not list its tools within 0.5 s" in result.stderr
    assert took < 15  # the option's 0.5 s, not the default 30 s
