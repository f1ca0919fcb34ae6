"""The dsh-code command end to end: flags, exit codes, JSON shape, logs, ask prompts, sdk/tools/check."""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import time
from pathlib import Path

import pytest
import zstandard
from typer.testing import CliRunner

from host.cli._app import app

runner = CliRunner()

BINDINGS = '''
from host.tools import tool, Ask

@tool(concurrency_safe=True)
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b

@tool
def shout(text: str) -> str:
    """Upper-case a text."""
    return text.upper()

def setup_registry(registry):
    registry.pre_execute(lambda call, decision: Ask("shouting is loud") if call.name == "shout" else None)
'''


@pytest.fixture
def bindings(tmp_path: Path) -> Path:
    path = tmp_path / "tools.py"
    path.write_text(BINDINGS)
    return path


def _program(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "prog.py"
    path.write_text(text)
    return path


def _json(tmp_path: Path, bindings: Path, text: str, *flags: str) -> tuple[int, dict[str, object]]:
    result = runner.invoke(
        app, ["run", str(_program(tmp_path, text)), "-b", str(bindings), "--json", *flags]
    )
    lines = [line for line in result.stdout.splitlines() if line.strip()]
    assert len(lines) == 1, result.stdout  # exactly one JSON object
    return result.exit_code, json.loads(lines[0])


def test_run_prints_logs_and_the_result(tmp_path: Path, bindings: Path) -> None:
    prog = _program(tmp_path, "print('adding')\nreturn await tools.add(a=2, b=3)")
    result = runner.invoke(app, ["run", str(prog), "--bindings", str(bindings)])
    assert result.exit_code == 0
    assert result.stdout.splitlines() == ["adding", "5"]


def test_json_output_success_and_failure_shapes(tmp_path: Path, bindings: Path) -> None:
    code, out = _json(tmp_path, bindings, "print('x')\nreturn {'n': await tools.add(a=1, b=1)}")
    assert (code, out) == (0, {"value": {"n": 2}, "logs": ["x"]})
    code, out = _json(tmp_path, bindings, "x = 1")
    assert (code, out) == (0, {"logs": []})
    code, out = _json(tmp_path, bindings, "print('before')\n1 / 0")
    assert code == 1
    assert set(out) == {"logs", "error"}
    error = out["error"]
    assert isinstance(error, dict)
    assert error["kind"] == "exception"
    assert error["exception_type"] == "ZeroDivisionError"
    assert out["logs"] == ["before"]


def test_the_program_can_come_from_stdin(bindings: Path) -> None:
    result = runner.invoke(
        app, ["run", "-", "-b", str(bindings), "--json"], input="return 40 + 2\n"
    )
    assert result.exit_code == 0
    assert json.loads(result.stdout) == {"value": 42, "logs": []}


@pytest.mark.parametrize(
    ("flags", "program", "kind", "fact"),
    [
        (["--compute-ms", "200"], "while True:\n    pass", "budget", ("budget", "compute")),
        (["--wall-ms", "300"], "import time\ntime.sleep(30)", "budget", ("budget", "wall")),
        (
            ["--max-output-bytes", "100"],
            "for i in range(1000):\n    print(i)",
            "output_limit",
            None,
        ),
        (
            ["--memory-mb", "64"],
            "xs = []\nwhile True:\n    xs.append(bytearray(1 << 20))",
            "memory",
            None,
        ),
        (["--policy", "restricted"], "import os\nreturn os.getcwd()", "parse", ("lineno", 1)),
    ],
)
def test_each_limit_flag_is_enforced(
    tmp_path: Path,
    bindings: Path,
    flags: list[str],
    program: str,
    kind: str,
    fact: tuple[str, object] | None,
) -> None:
    code, out = _json(tmp_path, bindings, program, *flags)
    assert code == 1
    error = out["error"]
    assert isinstance(error, dict)
    assert error["kind"] == kind
    if fact is not None:
        assert error[fact[0]] == fact[1]


def test_max_tool_calls_and_parallel_flags(tmp_path: Path, bindings: Path) -> None:
    program = (
        "import asyncio\n"
        "try:\n"
        "    await asyncio.gather(*(tools.add(a=i, b=i) for i in range(5)))\n"
        "except ToolCallError as e:\n"
        "    return e.code\n"
    )
    code, out = _json(
        tmp_path, bindings, program, "--max-tool-calls", "3", "--max-parallel-sub-calls", "1"
    )
    assert (code, out["value"]) == (0, "DENIED")


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["run", "/no/such/program.py"], "program file not found"),
        (["run", "-", "--policy", "lenient"], "--policy must be"),
        (["run", "-", "--compute-ms", "0"], "compute-ms"),
        (["run", "-", "--yes", "--no"], "exclude each other"),
        (["run", "-", "--isolation", "vm"], "--isolation must be"),
        (["run", "-", "--max-processes", "2"], "max-processes"),
        (["sdk", "--lang", "rust"], "--lang must be"),
        (["tools", "--format", "xml"], "--format must be"),
    ],
)
def test_usage_errors_exit_2_without_a_traceback(args: list[str], needle: str) -> None:
    result = runner.invoke(app, args, input="1\n")
    assert result.exit_code == 2
    assert needle in result.output
    assert "Traceback" not in result.output


def test_isolation_and_cgroup_flags_reach_the_runtime(tmp_path: Path, bindings: Path) -> None:
    program = (
        "return [open('/proc/net/dev').read().count(':') > 1, "
        "'dsh-code-' in open('/proc/self/cgroup').read()]"
    )
    code, out = _json(tmp_path, bindings, program, "--isolation", "process", "--no-cgroups")
    assert code == 0, out
    assert out["value"] == [True, False]  # the host's network interfaces show; no cgroup of ours
    code, out = _json(tmp_path, bindings, program, "--isolation", "namespaces")
    assert code == 0, out
    assert out["value"] == [False, True]  # only a loopback; the run's cgroup


def test_a_bindings_file_that_fails_to_import_is_a_usage_error(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text("x = 1\nimport no_such_module_here\n")
    result = runner.invoke(app, ["run", "-", "-b", str(bad)], input="1\n")
    assert result.exit_code == 2
    assert "bad.py (line 2)" in result.output and "ModuleNotFoundError" in result.output
    assert "Traceback" not in result.output
    empty = tmp_path / "empty.py"
    empty.write_text("x = 1\n")
    result = runner.invoke(app, ["run", "-", "-b", str(empty)], input="1\n")
    assert result.exit_code == 2 and "no tools" in result.output


def test_ask_decisions_follow_yes_no_and_the_missing_terminal(
    tmp_path: Path, bindings: Path
) -> None:
    program = "try:\n    return await tools.shout(text='hi')\nexcept ToolCallError as e:\n    return e.code"
    assert _json(tmp_path, bindings, program, "--yes")[1]["value"] == "HI"
    assert _json(tmp_path, bindings, program, "--no")[1]["value"] == "DENIED"
    assert _json(tmp_path, bindings, program)[1]["value"] == "DENIED"  # no terminal: not approved


def test_a_denial_for_want_of_a_terminal_says_so_and_names_yes(
    tmp_path: Path, bindings: Path
) -> None:
    program = (
        "try:\n    await tools.shout(text='hi')\nexcept ToolCallError as e:\n    return e.message"
    )
    assert _json(tmp_path, bindings, program)[1]["value"] == (
        "tool call shout denied: approval needed (shouting is loud), but no terminal can "
        "answer (standard input or error is not one): run dsh-code with --yes to allow such "
        "calls, or --no to deny them without asking"
    )


def _cli() -> list[str]:
    return [sys.executable, "-m", "host.cli"]


def test_ask_prompts_the_person_at_a_terminal(tmp_path: Path, bindings: Path) -> None:
    prog = _program(tmp_path, "return await tools.shout(text='hi')")
    main, child = os.openpty()
    proc = subprocess.Popen(
        [*_cli(), "run", str(prog), "-b", str(bindings)], stdin=child, stdout=child, stderr=child
    )
    os.close(child)
    seen = b""
    try:
        deadline = time.monotonic() + 30
        while b"allow shout?" not in seen and time.monotonic() < deadline:
            if select.select([main], [], [], 0.5)[0]:
                seen += os.read(main, 4096)
        assert b"shouting is loud" in seen
        os.write(main, b"y\n")
        while proc.poll() is None and time.monotonic() < deadline:
            if select.select([main], [], [], 0.2)[0]:
                try:
                    seen += os.read(main, 4096)
                except OSError:
                    break
        assert proc.wait(timeout=10) == 0
        assert b'"HI"' in seen
    finally:
        proc.kill()
        proc.wait()
        os.close(main)


def test_logs_stream_while_the_program_runs(tmp_path: Path, bindings: Path) -> None:
    prog = _program(
        tmp_path, "print('early', flush=True)\nimport time\ntime.sleep(3)\nprint('late')"
    )
    proc = subprocess.Popen(
        [*_cli(), "run", str(prog), "-b", str(bindings)], stdout=subprocess.PIPE
    )
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline()
        assert first == b"early\n"
        assert proc.poll() is None  # the line arrived while the program was still sleeping
        rest = proc.stdout.read()
        assert proc.wait(timeout=30) == 0
        assert rest == b"late\n"
    finally:
        proc.kill()
        proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()


def test_the_session_log_reconstructs_the_run(tmp_path: Path, bindings: Path) -> None:
    for name in ("session.jsonl", "session.jsonl.zst"):
        log = tmp_path / name
        prog = _program(tmp_path, "print('hi')\nreturn await tools.add(a=1, b=2)")
        result = runner.invoke(app, ["run", str(prog), "-b", str(bindings), "--log", str(log)])
        assert result.exit_code == 0
        data = log.read_bytes()
        if name.endswith(".zst"):
            data = zstandard.ZstdDecompressor().stream_reader(data).read()
        events = [json.loads(line) for line in data.decode().splitlines()]
        kinds = [e["event"] for e in events]
        assert kinds[0] == "run/start" and kinds[-1] == "run/end"
        assert events[0]["program"].startswith("print('hi')")
        assert {"tool/code-dispatch-start", "tool/code-dispatch", "result", "log"} <= set(kinds)
        dispatch = next(e for e in events if e["event"] == "tool/code-dispatch")
        assert dispatch["payload"]["name"] == "add" and dispatch["payload"]["is_error"] is False
        assert events[-1]["result"] == {"value": 3, "logs": ["hi"]}


def test_sdk_prints_python_and_typescript_and_checks_a_file(tmp_path: Path, bindings: Path) -> None:
    python = runner.invoke(app, ["sdk", "-b", str(bindings), "--lang", "python"])
    assert python.exit_code == 0
    assert "async def add(*, a: int, b: int) -> int" in python.stdout
    typescript = runner.invoke(app, ["sdk", "-b", str(bindings), "--lang", "typescript"])
    assert "declare const tools" in typescript.stdout
    saved = tmp_path / "sdk.pyi"
    saved.write_text(python.stdout)
    assert runner.invoke(app, ["sdk", "-b", str(bindings), "--check", str(saved)]).exit_code == 0
    saved.write_text(python.stdout + "# edited\n")
    assert runner.invoke(app, ["sdk", "-b", str(bindings), "--check", str(saved)]).exit_code == 1


@pytest.mark.parametrize("fmt", ["json", "openai", "anthropic"])
def test_tools_prints_native_schemas(bindings: Path, fmt: str) -> None:
    result = runner.invoke(app, ["tools", "-b", str(bindings), "--format", fmt])
    assert result.exit_code == 0
    schemas = json.loads(result.stdout)
    names = [s["function"]["name"] if fmt == "openai" else s["name"] for s in schemas]
    assert names == ["add", "shout"]
    if fmt == "anthropic":
        assert schemas[0]["input_schema"]["required"] == ["a", "b"]


def test_check_type_checks_a_program(tmp_path: Path, bindings: Path) -> None:
    bad = _program(tmp_path, "x = 1\nreturn await tools.add(a=1, b='two')")
    result = runner.invoke(app, ["check", str(bad), "-b", str(bindings)])
    assert result.exit_code == 1
    assert result.stdout.startswith(f"{bad}:2:")
    good = _program(tmp_path, "return await tools.add(a=1, b=2)")
    assert runner.invoke(app, ["check", str(good), "-b", str(bindings)]).exit_code == 0


def test_run_check_stops_a_bad_program_before_it_runs(tmp_path: Path, bindings: Path) -> None:
    code, out = _json(tmp_path, bindings, "print('ran')\nawait tools.ad(a=1, b=2)", "--check")
    assert code == 1
    error = out["error"]
    assert isinstance(error, dict) and error["kind"] == "parse"
    assert out["logs"] == []


def test_call_style_sync_runs_plain_calls_and_async_asks_for_await(
    tmp_path: Path, bindings: Path
) -> None:
    program = "return tools.add(a=2, b=3)"
    assert _json(tmp_path, bindings, program, "--call-style", "sync") == (
        0,
        {"value": 5, "logs": []},
    )
    code, out = _json(tmp_path, bindings, program, "--call-style", "async")
    error = out["error"]
    assert code == 1 and isinstance(error, dict)
    assert "await" in str(error["message"])
    threaded = (
        "import threading\nout = []\n"
        "t = threading.Thread(target=lambda: out.append(tools.add(a=1, b=1)))\n"
        "t.start()\nt.join()\nreturn out"
    )
    assert _json(tmp_path, bindings, threaded, "--call-style", "sync")[1]["value"] == [2]


def test_sdk_and_check_follow_the_call_style(tmp_path: Path, bindings: Path) -> None:
    sync = runner.invoke(app, ["sdk", "-b", str(bindings), "--call-style", "sync"])
    assert sync.exit_code == 0, sync.output
    assert "def add(*, a: int, b: int) -> int" in sync.stdout
    assert "async def" not in sync.stdout
    plain = _program(tmp_path, "return tools.add(a=1, b=2)")
    checked = runner.invoke(app, ["check", str(plain), "-b", str(bindings), "--call-style", "sync"])
    assert checked.exit_code == 0, checked.output
    bad = runner.invoke(app, ["sdk", "-b", str(bindings), "--call-style", "threads"])
    assert bad.exit_code == 2 and "--call-style must be async or sync" in bad.output
    typescript = runner.invoke(
        app, ["sdk", "-b", str(bindings), "--lang", "typescript", "--call-style", "sync"]
    )
    assert typescript.exit_code == 2 and "--lang python" in typescript.output


def test_preload_imports_modules_before_the_program(tmp_path: Path, bindings: Path) -> None:
    program = "import sys\nreturn ['colorsys' in sys.modules, 'wave' in sys.modules]"
    assert _json(tmp_path, bindings, program)[1]["value"] == [False, False]
    code, out = _json(tmp_path, bindings, program, "--preload", "colorsys", "--preload", "wave")
    assert (code, out["value"]) == (0, [True, True])


@pytest.mark.parametrize(
    ("module", "needle"),
    [("no_such_module_here", "no_such_module_here"), ("not a name", "--preload takes a module")],
)
def test_a_preload_that_cannot_be_imported_is_a_usage_error(
    tmp_path: Path, bindings: Path, module: str, needle: str
) -> None:
    prog = _program(tmp_path, "return 1")
    result = runner.invoke(app, ["run", str(prog), "-b", str(bindings), "--preload", module])
    assert result.exit_code == 2, result.output
    assert needle in result.stderr
    assert "Traceback" not in result.output


def test_ray_without_the_extra_is_a_usage_error_naming_it(
    tmp_path: Path, bindings: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)  # import ray -> ImportError
    prog = _program(tmp_path, "return 1")
    for args in (["run", str(prog)], ["mcp", "-b", str(bindings)]):
        result = runner.invoke(app, [*args, "--ray", "auto"])
        assert result.exit_code == 2, result.output
        lines = result.stderr.splitlines()
        assert len(lines) == 1 and "pip install 'dsh-code[ray]'" in lines[0], result.stderr
    json_out = runner.invoke(app, ["run", str(prog), "--ray", "auto", "--json"])
    assert json.loads(json_out.stdout)["error"]["kind"] == "usage"


def test_ray_addresses_it_cannot_use_are_usage_errors(tmp_path: Path, bindings: Path) -> None:
    prog = _program(tmp_path, "return 1")
    client = runner.invoke(app, ["run", str(prog), "--ray", "ray://head:10001"])
    assert client.exit_code == 2 and "ray://" in client.stderr
    empty = runner.invoke(app, ["run", str(prog), "--ray", " "])
    assert empty.exit_code == 2 and "--ray needs an address" in empty.stderr
    with_session = runner.invoke(
        app, ["run", str(prog), "--ray", "auto", "--session", str(tmp_path / "s.state")]
    )
    assert with_session.exit_code == 2 and "--session" in with_session.stderr


def test_ray_at_an_address_nobody_listens_on_fails_at_once(tmp_path: Path) -> None:
    import socket

    from .support import run

    with socket.socket() as probe:  # a port that was free a moment ago: nobody listens there
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    prog = _program(tmp_path, "return 1")
    done = run("run", str(prog), "--ray", f"127.0.0.1:{port}", "--json")
    assert done.returncode == 2, done.stderr
    assert f"cannot reach the Ray cluster at 127.0.0.1:{port}" in done.stderr
    assert json.loads(done.stdout)["error"]["kind"] == "usage"
    assert "Traceback" not in done.stderr
