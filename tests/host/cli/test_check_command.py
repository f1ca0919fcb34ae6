"""``dsh-code check``'s report: compiler lines naming the file, a code frame at a terminal."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from host.cli._app import app
from host.cli._check_command import render_findings
from sdkgen import Diagnostic
from tests.host.cli.support import Terminal

runner = CliRunner()

TOOLS = '''
from dsh_code import tool

@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b
'''
BAD = 'x = 1\nreturn await tools.add(a=1, b="two")\n'
FINDING = (
    "2:29: error: Argument to function `add` is incorrect: Expected `int`, "
    'found `Literal["two"]` [invalid-argument-type]'
)


@pytest.fixture
def tools(tmp_path: Path) -> Path:
    path = tmp_path / "tools.py"
    path.write_text(TOOLS)
    return path


def test_an_error_is_a_compiler_line_naming_the_file(tmp_path: Path, tools: Path) -> None:
    program = tmp_path / "prog.py"
    program.write_text(BAD)
    result = runner.invoke(app, ["check", str(program), "-b", str(tools)])
    assert result.exit_code == 1
    assert result.stdout == f"{program}:{FINDING}\n"


def test_standard_input_is_named_stdin(tools: Path) -> None:
    result = runner.invoke(app, ["check", "-", "-b", str(tools)], input=BAD)
    assert result.exit_code == 1
    assert result.stdout == f"<stdin>:{FINDING}\n"


def test_no_problems_is_one_line_and_exit_0(tmp_path: Path, tools: Path) -> None:
    program = tmp_path / "good.py"
    program.write_text("return await tools.add(a=1, b=2)\n")
    result = runner.invoke(app, ["check", str(program), "-b", str(tools)])
    assert result.exit_code == 0
    assert result.stdout == f"{program}: no problems found\n"


def test_a_terminal_gets_a_code_frame(tmp_path: Path, tools: Path) -> None:
    (tmp_path / "prog.py").write_text(BAD)
    terminal = Terminal.start("check", "prog.py", "-b", str(tools), cwd=tmp_path, columns=160)
    try:
        assert terminal.finish() == 1
    finally:
        terminal.close()
    assert terminal.lines() == [
        f"prog.py:{FINDING}",
        ' 2 | return await tools.add(a=1, b="two")',
        "   |                             ^",
    ]


def test_a_frame_keeps_tabs_aligned_and_cuts_a_long_line() -> None:
    found = Diagnostic(line=1, column=3, message="m", severity="error", rule="r")
    assert render_findings("p.py", "\tx(y)\n", [found], frames=True).splitlines() == [
        "p.py:1:3: error: m [r]",
        " 1 | \tx(y)",
        "   | \t ^",
    ]
    far = Diagnostic(line=1, column=500, message="m", severity="error", rule="r")
    frame = render_findings("p.py", "a" * 1000 + "\n", [far], frames=True).splitlines()
    assert len(frame[1]) < 140 and frame[2].endswith("^")
    assert frame[2].index("^") == frame[1].index("a") + 499 - (500 - 1 - 60)
