"""``dsh-code repl`` in a real pseudo-terminal: inputs that share variables, Ctrl-C, Ctrl-D."""

from __future__ import annotations

import signal
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from host.cli._repl import needs_more

from .support import (
    Terminal,
    WorkdirWatch,
    descendants,
    gone,
    sweep,
    wait_until,
    workdirs,
)

pytestmark = pytest.mark.timeout(120)

TOOLS = '''
from host.tools import tool, Ask

@tool
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

PROMPT = b">>> "


@pytest.fixture
def tools(tmp_path: Path) -> Path:
    path = tmp_path / "tools.py"
    path.write_text(TOOLS)
    return path


@pytest.fixture
def home(tmp_path: Path) -> Path:
    path = tmp_path / "home"
    path.mkdir()
    return path


@pytest.fixture
def open_terminals() -> Iterator[list[tuple[Terminal, WorkdirWatch]]]:
    started: list[tuple[Terminal, WorkdirWatch]] = []
    yield started
    for terminal, watch in started:
        terminal.close()
        sweep(*watch.stop())  # only after a failed test: a clean end removes its own


def _repl(
    started: list[tuple[Terminal, WorkdirWatch]], home: Path, *args: str
) -> tuple[Terminal, WorkdirWatch]:
    terminal = Terminal.start("repl", *args, HOME=str(home))
    watch = WorkdirWatch(terminal.process.pid)
    started.append((terminal, watch))
    terminal.wait_raw(PROMPT)
    return terminal, watch


def _type(terminal: Terminal, line: str) -> None:
    prompts = terminal.raw.count(PROMPT)
    terminal.process.send(line + "\r")
    terminal.wait_raw(PROMPT, prompts + 1)


def _end(terminal: Terminal, watch: WorkdirWatch) -> None:
    """Ctrl-D: exit 0, every process and run directory gone."""
    below = descendants(terminal.process.pid)
    terminal.process.sendeof()
    code = terminal.finish()
    seen = watch.stop()
    assert code == 0, "\n".join(terminal.lines())
    assert gone(below)
    assert not [d for d in seen if d.exists()]


def test_inputs_share_variables_and_the_screen_shows_each_result(
    tools: Path, home: Path, open_terminals: list[tuple[Terminal, WorkdirWatch]]
) -> None:
    terminal, watch = _repl(open_terminals, home, "-b", str(tools), "--yes")
    assert any("dsh-code repl: 2 tools; each input runs" in line for line in terminal.lines())
    _type(terminal, "x = 21")
    _type(terminal, "x * 2")
    assert "42" in terminal.lines()
    terminal.process.send("def f(n):\r")
    terminal.wait_raw(b"... ")
    terminal.process.send("    return n + x\r")
    terminal.wait_raw(b"... ", 2)
    _type(terminal, "")  # the blank line ends the block
    _type(terminal, "print('hello', f(1))")
    assert "hello 22" in terminal.lines()
    _type(terminal, "await tools.add(a=x, b=1)")
    assert "22" in terminal.lines()[-2:]
    _type(terminal, "await tools.shout(text='hi')")  # --yes: allowed without asking
    assert '"HI"' in terminal.lines()
    _type(terminal, "1 / 0")
    assert "✗ the program failed: exception" in terminal.lines()
    assert "ZeroDivisionError: division by zero" in terminal.lines()
    _type(terminal, "x")  # the failed run changed nothing
    assert terminal.lines()[-2] == "21"
    _end(terminal, watch)
    history = home / ".dsh_code_history"
    assert "x = 21" in history.read_text()
    assert stat.S_IMODE(history.stat().st_mode) == 0o600


def test_ctrl_c_aborts_a_long_run_then_cancels_an_input(
    tools: Path, home: Path, open_terminals: list[tuple[Terminal, WorkdirWatch]]
) -> None:
    terminal, watch = _repl(open_terminals, home, "-b", str(tools))
    _type(terminal, "kept = 'still here'")
    terminal.process.send("import time; time.sleep(60)\r")
    assert wait_until(lambda: bool(workdirs(descendants(terminal.process.pid))))
    terminal.wait_for("(Ctrl-C aborts)")  # the status line: the run is under way
    prompts = terminal.raw.count(PROMPT)
    terminal.process.sendintr()
    terminal.wait_raw(PROMPT, prompts + 1)
    lines = terminal.lines()
    assert "✗ the program failed: aborted" in lines
    assert "interrupted by SIGINT" in lines
    terminal.process.send("half typed")
    terminal.wait_for("half typed")
    terminal.process.sendintr()
    terminal.wait_raw(PROMPT, prompts + 2)
    assert "KeyboardInterrupt" in terminal.lines()
    _type(terminal, "kept")
    assert '"still here"' in terminal.lines()
    _end(terminal, watch)


def test_an_ask_is_answered_at_the_prompt(
    tools: Path, home: Path, open_terminals: list[tuple[Terminal, WorkdirWatch]]
) -> None:
    terminal, watch = _repl(open_terminals, home, "-b", str(tools))
    terminal.process.send("await tools.shout(text='hi')\r")
    terminal.wait_for("allow shout? [y/N]:")
    assert any("shouting is loud" in line for line in terminal.lines())
    _type(terminal, "y")
    assert '"HI"' in terminal.lines()
    _end(terminal, watch)


def test_the_session_file_carries_variables_across_repls(
    tools: Path, home: Path, tmp_path: Path, open_terminals: list[tuple[Terminal, WorkdirWatch]]
) -> None:
    state = tmp_path / "repl.state"
    terminal, watch = _repl(open_terminals, home, "--session", str(state), "--no-history")
    _type(terminal, "import json")
    _type(terminal, "y = {'k': 7}")
    _end(terminal, watch)
    assert stat.S_IMODE(state.stat().st_mode) == 0o600
    assert not (home / ".dsh_code_history").exists()
    again, watch = _repl(open_terminals, home, "--session", str(state), "--no-history")
    assert f"session: continues from {state}".encode() in again.raw
    _type(again, "json.dumps(y)")
    assert '"{\\"k\\": 7}"' in again.lines()
    _end(again, watch)


def test_call_style_sync_in_the_repl(
    tools: Path, home: Path, open_terminals: list[tuple[Terminal, WorkdirWatch]]
) -> None:
    terminal, watch = _repl(open_terminals, home, "-b", str(tools), "--call-style", "sync")
    _type(terminal, "n = tools.add(a=2, b=3)")
    _type(terminal, "n * 10")
    assert "50" in terminal.lines()
    _end(terminal, watch)


def test_a_history_file_that_cannot_be_kept_is_warned_of(
    home: Path, tmp_path: Path, open_terminals: list[tuple[Terminal, WorkdirWatch]]
) -> None:
    where = tmp_path / "no-such-folder" / "history"
    terminal, watch = _repl(open_terminals, home, "--history", str(where))
    warning = (
        f"dsh-code: warning: the history cannot be kept in {where}: {where.parent} is not a "
        "directory; give a file in one (or --no-history)"
    )
    assert warning in terminal.raw.decode().replace("\r\n", "")
    _type(terminal, "1 + 1")
    _end(terminal, watch)
    assert not where.parent.exists()


def test_a_value_that_is_not_json_shows_as_its_repr_and_a_failure_keeps_earlier_names(
    home: Path, open_terminals: list[tuple[Terminal, WorkdirWatch]]
) -> None:
    terminal, watch = _repl(open_terminals, home)
    _type(terminal, "s = {1, 2}")
    _type(terminal, "s")
    assert terminal.lines()[-2] == "{1, 2}"
    _type(terminal, "import datetime; datetime.date(2024, 1, 2), 'x'")
    assert terminal.lines()[-2] == "(datetime.date(2024, 1, 2), 'x')"
    _type(terminal, "kept = 7; 1 / 0")
    assert "ZeroDivisionError: division by zero" in terminal.lines()
    _type(terminal, "kept")  # assigned before the exception: kept, as in Python's REPL
    assert terminal.lines()[-2] == "7"
    _end(terminal, watch)


def test_up_arrow_recalls_the_last_input(
    home: Path, open_terminals: list[tuple[Terminal, WorkdirWatch]]
) -> None:
    terminal, watch = _repl(open_terminals, home)
    _type(terminal, "40 + 2")
    _type(terminal, "\x1b[A")  # up: the last line again
    assert [line for line in terminal.lines() if line == "42"] == ["42", "42"]
    _end(terminal, watch)


def test_sigterm_ends_the_repl_and_its_run(
    home: Path, open_terminals: list[tuple[Terminal, WorkdirWatch]]
) -> None:
    terminal, watch = _repl(open_terminals, home)
    terminal.process.send("import time; time.sleep(60)\r")
    assert wait_until(lambda: bool(workdirs(descendants(terminal.process.pid))))
    below = descendants(terminal.process.pid)
    terminal.process.kill(signal.SIGTERM)
    code = terminal.finish()
    seen = watch.stop()
    assert code == 143, "\n".join(terminal.lines())
    notice = "dsh-code: SIGTERM: aborting the run (another SIGTERM exits at once)"
    assert notice in terminal.raw.decode(errors="replace")
    assert gone(below)
    assert not [d for d in seen if d.exists()]


@pytest.mark.parametrize(
    ("source", "more"),
    [
        ("x = 1", False),
        ("def f():", True),
        ("def f():\n    return 1", True),
        ("def f():\n    return 1\n", False),
        ("await tools.add(a=1, b=2)", False),
        ("return 5", False),
        ("if True:\n    return 3", True),
        ("x = (1,", True),
        ("x = 1 +", False),  # a syntax error: the run reports it
        ("'''open", True),
        ("# a comment", False),
        ("x = 1\ny = 2", False),
    ],
)
def test_a_block_continues_while_it_is_incomplete(source: str, more: bool) -> None:
    assert needs_more(source) is more


LEAKY_TOOLS = '''
from host.tools import tool, Ask

@tool
def echo(text: str) -> str:
    """Print a text on the command's stdout, and return it."""
    print("echo:", text)
    return text

def setup_registry(registry):
    registry.pre_execute(lambda call, decision: Ask(f"echo {call.args['text']}"))
'''


def test_nothing_a_program_chose_reaches_the_terminal_unescaped(
    tmp_path: Path, home: Path, open_terminals: list[tuple[Terminal, WorkdirWatch]]
) -> None:
    tools = tmp_path / "leaky.py"
    tools.write_text(LEAKY_TOOLS)
    terminal, watch = _repl(open_terminals, home, "-b", str(tools))
    _type(terminal, 'm = lambda path: chr(27) + "]0;leak-" + path + chr(7)')
    _type(terminal, 'print(m("log"))')
    terminal.process.send('await tools.echo(text=m("tool"))\r')
    terminal.wait_for("allow echo? [y/N]:")
    _type(terminal, "y")
    _type(terminal, 'globals()[m("name")] = __import__("threading").Lock()')
    _type(terminal, 'raise ValueError(m("error"))')
    _type(terminal, 'm("value")')
    _end(terminal, watch)
    paths = ("log", "tool", "name", "error", "value")
    assert [path for path in paths if f"\x1b]0;leak-{path}".encode() in terminal.raw] == []
    assert b"\x1b]0;leak-" not in terminal.raw
    assert terminal.screen.title == ""
    screen = "\n".join(terminal.lines())
    shown = [f"\\x1b]0;leak-{path}\\x07" for path in ("log", "tool", "name", "error")]
    shown.append('"\\u001b]0;leak-value\\u0007"')  # the value as JSON writes it
    assert [text for text in shown if text not in screen] == [], screen
    assert "echo \\x1b]0;leak-tool\\x07 — allow echo? [y/N]: y" in screen
