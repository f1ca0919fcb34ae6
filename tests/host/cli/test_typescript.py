"""dsh-code with TypeScript programs: run, check, the flags TypeScript refuses, and mcp --lang."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.host.cli.support import ROOT, env, run

BINDINGS = str(ROOT / "examples" / "fs_tools.py")


@pytest.fixture
def program(tmp_path: Path) -> Path:
    path = tmp_path / "prog.ts"
    path.write_text(
        "enum Kind { Dir = 'dir' }\n"
        "const names: string[] = await tools.list_dir({ path: 'examples' });\n"
        "console.log(Kind.Dir, names.length > 0);\n"
        "return await tools.count_words({ text: 'a b c' });\n"
    )
    return path


def test_a_ts_file_runs_as_typescript(program: Path) -> None:
    done = run("run", str(program), "--bindings", BINDINGS, "--json", timeout=120)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"value": 3, "logs": ["dir true"]}


def test_lang_typescript_reads_standard_input() -> None:
    done = run("run", "-", "--lang", "typescript", "--json", stdin="return [1n << 70n];\n")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"value": [2**70], "logs": []}


def test_a_failure_is_reported_in_program_lines(tmp_path: Path) -> None:
    path = tmp_path / "bad.ts"
    path.write_text("const a = 1;\nthrow new TypeError('no ' + a);\n")
    done = run("run", str(path), "--json", timeout=120)
    assert done.returncode == 1
    error = json.loads(done.stdout)["error"]
    assert (error["kind"], error["exception_type"], error["lineno"]) == (
        "exception",
        "TypeError",
        2,
    )


def test_check_prints_diagnostics_in_program_lines_with_the_file_name(
    tmp_path: Path, program: Path
) -> None:
    done = run("check", str(program), "--bindings", BINDINGS, timeout=120)
    assert (done.returncode, done.stdout) == (0, f"{program}: no problems found\n"), done.stderr
    bad = tmp_path / "bad.ts"
    bad.write_text("const n: number = 1;\nconst s: string = n;\nawait tools.nope({});\n")
    done = run("check", str(bad), "--bindings", BINDINGS, timeout=120)
    assert done.returncode == 1, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith(f"{bad}:2:7: error: Type 'number' is not assignable to type")
    assert lines[0].endswith("[TS2322]")
    assert lines[1].startswith(f"{bad}:3:13: error: Property 'nope' does not exist")


@pytest.mark.parametrize(
    ("flags", "needle"),
    [
        (["--session", "/tmp/never-written.state"], "--session is for Python programs"),
        (["--policy", "restricted"], "--policy restricted is for Python"),
        (["--call-style", "sync"], "--call-style sync is for Python"),
        (["--preload", "json"], "--preload imports Python modules"),
        (["--lang", "cobol"], "--lang must be python or typescript"),
    ],
)
def test_flags_typescript_cannot_have_are_usage_errors(
    program: Path, flags: list[str], needle: str
) -> None:
    lang = [] if "--lang" in flags else ["--lang", "typescript"]
    done = run("run", str(program), *lang, *flags, "--json")
    assert done.returncode == 2
    assert needle in json.loads(done.stdout)["error"]["message"]
    assert not Path("/tmp/never-written.state").exists()


def test_mcp_lang_typescript_serves_a_typescript_run_code() -> None:
    pytest.importorskip("mcp")
    script = (
        "import anyio, sys\n"
        "from mcp import ClientSession, StdioServerParameters\n"
        "from mcp.client.stdio import stdio_client\n"
        "async def main():\n"
        "    params = StdioServerParameters(command=sys.executable, args=['-m', 'host.cli', 'mcp',"
        f" '--lang', 'typescript', '--bindings', {BINDINGS!r}])\n"
        "    async with stdio_client(params) as (r, w), ClientSession(r, w) as s:\n"
        "        await s.initialize()\n"
        "        tools = {t.name: t for t in (await s.list_tools()).tools}\n"
        "        print('TS' if 'TypeScript' in tools['run_code'].description else 'PY')\n"
        "        print('reset_session' in tools)\n"
        "        out = await s.call_tool('run_code', {'code': \"return await tools.count_words({ text: 'x y' });\"})\n"
        "        print(out.structured_content)\n"
        "anyio.run(main)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=120,
        env=env(),
        cwd=ROOT,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.splitlines() == ["TS", "False", "{'logs': [], 'result': 2}"]
