"""Every way ``dsh-code`` can fail: a one-line message, the right exit code, one JSON object."""

from __future__ import annotations

import json
import os
import stat
import sys
from pathlib import Path
from typing import Any

import pytest

from .support import ROOT, run

pytestmark = pytest.mark.timeout(120)

TOOLS = '''
from host.tools import tool

@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b
'''

RESERVED = """
from host.tools import define_tool

run_code = define_tool(
    name="run_code", description="Shadows the reserved tool.", parameters={}, execute=lambda a, c: 1
)
"""

NOISY = '''
import os, sys
print("printed at import")
sys.stdout.write("written at import\\n")
os.system("echo from a subprocess at import")
from host.tools import tool

@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    print("printed inside the tool")
    os.system("echo from a subprocess inside the tool")
    return a + b

def setup_registry(registry):
    print("printed by setup_registry")
'''


@pytest.fixture
def tools(tmp_path: Path) -> Path:
    path = tmp_path / "tools.py"
    path.write_text(TOOLS)
    return path


@pytest.fixture
def prog(tmp_path: Path) -> Path:
    path = tmp_path / "prog.py"
    path.write_text("print('hi')\nreturn await tools.add(a=2, b=3)\n")
    return path


def _one_object(stdout: str) -> dict[str, Any]:
    lines = stdout.splitlines()
    assert len(lines) == 1, stdout
    obj = json.loads(lines[0])
    assert isinstance(obj, dict)
    return obj


def _clean(stderr: str) -> None:
    assert "Traceback" not in stderr and "Exception Group" not in stderr, stderr
    assert "internal error" not in stderr, stderr


@pytest.mark.parametrize(
    ("case", "needle"),
    [
        (["run", "{prog}", "--bogus"], "No such option: --bogus"),
        (["run"], "Missing argument"),
        (["run", "{prog}", "--compute-ms", "many"], "--compute-ms"),
        (["run", "{prog}", "--max-heap-mb", str(10**20)], "--max-heap-mb"),
        (["run", "{prog}", "--memory-mb", "0"], "--memory-mb"),
        (["run", "/no/such/prog.py"], "program file not found"),
        (["run", "{dir}"], "is a directory"),
        (["run", "{prog}", "-b", "{dir}"], "is a directory"),
        (["run", "{prog}", "-b", "{reserved}"], "run_code"),
        (["run", "{prog}", "--policy", "lenient"], "--policy must be python or restricted"),
        (["run", "{prog}", "--log", "{symlink}"], "symbolic link"),
        (["run", "{prog}", "--log", "/proc/version"], "cannot write the log /proc/version"),
        (["run", "{prog}", "--log", "{dir}"], "is a directory"),
        (["run", "{prog}", "--mcp-config", "{nocommand}"], "needs a 'command' string"),
    ],
)
def test_usage_errors_are_one_line_and_one_json_object(
    tmp_path: Path, tools: Path, prog: Path, case: list[str], needle: str
) -> None:
    (tmp_path / "reserved.py").write_text(RESERVED)
    (tmp_path / "target").write_text("precious\n")
    (tmp_path / "link").symlink_to(tmp_path / "target")
    (tmp_path / "nocommand.json").write_text(json.dumps({"mcpServers": {"x": {"args": []}}}))
    names = {
        "prog": str(prog),
        "dir": str(tmp_path),
        "reserved": str(tmp_path / "reserved.py"),
        "symlink": str(tmp_path / "link"),
        "nocommand": str(tmp_path / "nocommand.json"),
    }
    args = [part.format(**names) for part in case]
    if "-b" not in args and len(args) > 1:
        args += ["-b", str(tools)]
    done = run(*args, "--json")
    assert done.returncode == 2, done.stderr
    _clean(done.stderr)
    assert needle in done.stderr
    obj = _one_object(done.stdout)
    assert obj["error"] == {"kind": "usage", "message": obj["error"]["message"]}
    assert needle in obj["error"]["message"]
    assert (tmp_path / "target").read_text() == "precious\n"  # the symlink was not followed


@pytest.mark.parametrize("command", ["run", "sdk", "tools", "check", "mcp"])
def test_a_tool_named_run_code_is_a_usage_error_on_every_command(
    tmp_path: Path, prog: Path, command: str
) -> None:
    reserved = tmp_path / "reserved.py"
    reserved.write_text(RESERVED)
    args = [command, str(prog)] if command in ("run", "check") else [command]
    done = run(*args, "-b", str(reserved))
    assert done.returncode == 2, done.stderr
    _clean(done.stderr)
    assert "run_code" in done.stderr and len(done.stderr.strip().splitlines()) == 1


def test_a_program_from_a_closed_stdin_is_a_usage_error(tools: Path) -> None:
    done = run("run", "-", "-b", str(tools), "--json", stdin=None, preexec_fn=lambda: os.close(0))
    assert done.returncode == 2
    _clean(done.stderr)
    assert "standard input is closed" in done.stderr
    assert _one_object(done.stdout)["error"] == {
        "kind": "usage",
        "message": "standard input is closed: give a program file, or pipe it in",
    }


def test_a_log_that_cannot_be_written_keeps_the_result(tools: Path, prog: Path) -> None:
    done = run("run", str(prog), "-b", str(tools), "--json", "--log", "/dev/full")
    assert done.returncode == 0, done.stderr
    _clean(done.stderr)
    obj = _one_object(done.stdout)
    assert obj["value"] == 5 and obj["logs"] == ["hi"]
    assert "cannot write the log /dev/full" in str(obj["log_error"])
    assert "cannot write the log /dev/full" in done.stderr


def test_the_log_is_created_0600_and_replaces_a_file_without_touching_its_links(
    tmp_path: Path, tools: Path, prog: Path
) -> None:
    log = tmp_path / "session.jsonl"
    other = tmp_path / "other-name"
    log.write_text("old\n")
    os.chmod(log, 0o644)
    os.link(log, other)  # a hard link planted at the path
    done = run("run", str(prog), "-b", str(tools), "--log", str(log))
    assert done.returncode == 0, done.stderr
    assert stat.S_IMODE(log.stat().st_mode) == 0o600
    assert other.read_text() == "old\n"
    assert '"event":"run/end"' in log.read_text()


def test_run_check_without_ty_is_a_usage_error(tools: Path, prog: Path, tmp_path: Path) -> None:
    hide = tmp_path / "sitecustomize.py"  # this interpreter then finds no ty anywhere
    hide.write_text("import shutil\nshutil.which = lambda *a, **k: None\n")
    from .support import env

    environment = env()
    environment["PYTHONPATH"] = f"{tmp_path}{os.pathsep}{environment['PYTHONPATH']}"
    done = run("run", str(prog), "-b", str(tools), "--check", "--json", env=environment)
    assert done.returncode == 2, done.stderr
    _clean(done.stderr)
    assert "pip install ty" in done.stderr and len(done.stderr.strip().splitlines()) == 1
    assert _one_object(done.stdout)["error"]["kind"] == "usage"


def test_whatever_the_bindings_print_stays_off_stdout(tmp_path: Path, prog: Path) -> None:
    noisy = tmp_path / "noisy.py"
    noisy.write_text(NOISY)
    done = run("run", str(prog), "-b", str(noisy), "--json")
    assert done.returncode == 0, done.stderr
    assert _one_object(done.stdout) == {"value": 5, "logs": ["hi"]}
    for text in ("printed at import", "from a subprocess at import", "printed inside the tool"):
        assert text in done.stderr
    plain = run("run", str(prog), "-b", str(noisy))
    assert plain.stdout.splitlines() == ["hi", "5"]
    schemas = run("tools", "-b", str(noisy))
    assert json.loads(schemas.stdout)[0]["name"] == "add"
    sdk = run("sdk", "-b", str(noisy))
    assert sdk.stdout.startswith('"""') or sdk.stdout.startswith("from"), sdk.stdout[:200]
    assert "printed" not in sdk.stdout and "subprocess" not in sdk.stdout


def test_help_version_and_completion() -> None:
    for flag in ("-h", "--help"):
        done = run("run", flag)
        assert done.returncode == 0
        assert "--max-parallel-sub-calls N" in done.stdout  # whole, not cut at 80 columns
        assert "--max-heap-mb, --memory-mb MIB" in done.stdout
    version = run("--version")
    assert version.returncode == 0 and version.stdout.startswith("dsh-code ")
    completion = run("--show-completion", "bash", env={**os.environ, "SHELL": "/bin/bash"})
    assert completion.returncode == 0 and "complete" in completion.stdout
    mcp = run("mcp", "-h")
    for flag in ("--max-output-bytes", "--max-parallel-sub-calls", "--wall-ms", "--token"):
        assert flag in mcp.stdout
    assert "[default: 50000" in mcp.stdout  # below common MCP clients' 60 s request timeout


def test_a_server_printing_garbage_fails_fast_with_a_message(tmp_path: Path, prog: Path) -> None:
    faulty = ROOT / "tests" / "host" / "mcp" / "servers" / "faulty.py"
    done = run(
        "run", str(prog), "--mcp", f"junk={sys.executable} {faulty} garbage", "--json", timeout=60
    )
    assert done.returncode == 2, done.stderr
    _clean(done.stderr)
    assert "MCP server 'junk'" in done.stderr and "not JSON-RPC" in done.stderr
    assert _one_object(done.stdout)["error"]["kind"] == "usage"
