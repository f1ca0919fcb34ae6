"""``dsh-code run`` at a real pseudo-terminal: the status line, prompts, escapes, Ctrl-C."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from .support import Terminal, WorkdirWatch, descendants, gone, sweep

pytestmark = pytest.mark.timeout(90)

BINDINGS = '''
import time
from host.tools import tool, Ask

@tool
def shout(text: str) -> str:
    """Upper-case a text."""
    return text.upper()

@tool
def stall(seconds: float) -> str:
    """Block a worker thread (ignores the run's abort)."""
    time.sleep(seconds)
    return "done"

def setup_registry(registry):
    registry.pre_execute(lambda call, decision: Ask("shouting is loud") if call.name == "shout" else None)
'''

STATUS = "compute "  # a fragment of the status line, never of the programs' logs


@pytest.fixture
def bindings(tmp_path: Path) -> Path:
    path = tmp_path / "tools.py"
    path.write_text(BINDINGS)
    return path


def _program(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "prog.py"
    path.write_text(text)
    return path


def _never_shared(lines: list[str]) -> None:
    for line in lines:
        if STATUS in line:
            assert "alpha" not in line and "beta" not in line and "gamma" not in line, line


def test_logs_scroll_above_the_status_line_and_never_share_a_line(
    tmp_path: Path, bindings: Path
) -> None:
    program = _program(
        tmp_path,
        "import time\nfor word in ('alpha', 'beta', 'gamma'):\n"
        "    time.sleep(0.4)\n    print(word, flush=True)\nreturn 7",
    )
    for columns in (100, 40):
        term = Terminal.start("run", str(program), "-b", str(bindings), columns=columns)
        term.checks.append(_never_shared)  # every intermediate screen, byte by byte
        try:
            assert term.finish() == 0
        finally:
            term.close()
        assert STATUS.encode() in term.raw  # the status line was shown while it ran
        assert term.lines() == ["alpha", "beta", "gamma", "7"]  # and erased at the end


def test_logs_past_a_screenful_are_a_head_one_line_and_a_tail(
    tmp_path: Path, bindings: Path
) -> None:
    program = _program(tmp_path, "for i in range(500):\n    print('line', i)\nreturn 7")
    log = tmp_path / "run.jsonl"
    term = Terminal.start("run", str(program), "-b", str(bindings), "--log", str(log), columns=300)
    try:
        assert term.finish() == 0
    finally:
        term.close()
    # 30 rows: half for the head, the line between, the tail, the result and a prompt's row.
    assert term.lines() == [
        *(f"line {i}" for i in range(15)),
        f"[... 474 lines ({sum(len(f'line {i}') + 1 for i in range(15, 489)):,} bytes) of the "
        f'logs left out here; the whole text: {log} (its "log" records)]',
        *(f"line {i}" for i in range(489, 500)),
        "7",
    ]
    assert log.read_text().count('"event":"log"') == 500
    full = Terminal.start("run", str(program), "-b", str(bindings), "--full-logs")
    try:
        assert full.finish() == 0
    finally:
        full.close()
    assert all(f"line {i}\r\n".encode() in full.raw for i in range(500))
    assert full.lines()[-2:] == ["line 499", "7"]


def test_an_ask_prompt_is_visible_and_answerable(tmp_path: Path, bindings: Path) -> None:
    program = _program(
        tmp_path,
        "print('before', flush=True)\nr = await tools.shout(text='hi')\nprint('after')\nreturn r",
    )
    term = Terminal.start("run", str(program), "-b", str(bindings))
    try:
        term.wait_for("allow shout? [y/N]:")
        deadline = time.monotonic() + 1.0  # ten refreshes of the status line
        while time.monotonic() < deadline:
            term.pump(0.1)
        prompt = [line for line in term.lines() if "allow shout?" in line]
        assert prompt == ["shouting is loud — allow shout? [y/N]:"], term.lines()
        assert not any(STATUS in line for line in term.lines())  # paused while asking
        term.process.send(b"y\r")
        assert term.finish() == 0
    finally:
        term.close()
    lines = term.lines()
    assert lines[0] == "before"
    assert lines[-2:] == ["after", '"HI"']


def test_escape_sequences_in_output_are_shown_escaped(tmp_path: Path, bindings: Path) -> None:
    program = _program(
        tmp_path,
        "print('title \\x1b]0;pwned\\x07 clip \\x1b]52;c;ZXZpbA==\\x07 end')\n"
        "return 'bell \\x07 cursor \\x1b[2J'",
    )
    term = Terminal.start("run", str(program), "-b", str(bindings))
    try:
        assert term.finish() == 0
    finally:
        term.close()
    assert b"\x1b]52" not in term.raw and b"\x1b]0;" not in term.raw and b"\x07" not in term.raw
    assert term.lines()[0] == "title \\x1b]0;pwned\\x07 clip \\x1b]52;c;ZXZpbA==\\x07 end"
    assert term.screen.title == ""  # no window title was set


def test_ctrl_c_aborts_the_run_and_leaves_nothing_behind(tmp_path: Path, bindings: Path) -> None:
    program = _program(
        tmp_path,
        "import os, subprocess, time\nsubprocess.Popen(['sleep', '60'])\n"
        "print('workdir', os.getcwd(), flush=True)\ntime.sleep(60)",
    )
    term = Terminal.start("run", str(program), "-b", str(bindings), "--isolation", "process")
    try:
        term.wait_for("workdir ")
        workdir = Path(
            next(line for line in term.lines() if line.startswith("workdir ")).split()[1]
        )
        assert workdir.is_dir()
        started = descendants(term.process.pid)
        assert started  # the runtime's template, the child, its sleep
        sent = time.monotonic()
        term.process.sendintr()
        code = term.finish()
        took = time.monotonic() - sent
    finally:
        term.close()
    assert code == 130
    assert took < 10  # a sanity bound: the clean-up is bounded
    text = "\n".join(term.lines())
    assert "aborted" in text and "interrupted by SIGINT" in text
    assert "Traceback" not in text
    assert not any(STATUS in line for line in term.lines())  # the status line is gone
    assert gone(started)
    assert not workdir.exists()


def test_a_second_ctrl_c_exits_at_once(tmp_path: Path, bindings: Path) -> None:
    program = _program(
        tmp_path,
        "import os\nprint('stalling in', os.getcwd(), flush=True)\n"
        "return await tools.stall(seconds=60)",
    )
    term = Terminal.start("run", str(program), "-b", str(bindings), "--isolation", "process")
    watch = WorkdirWatch(term.process.pid)  # the run's directory and the spare children's
    try:
        term.wait_for("stalling in ")
        started = descendants(term.process.pid)
        term.process.sendintr()  # the stalled tool keeps the clean-up waiting
        term.wait_for("Ctrl-C again exits at once")  # the first one was handled
        sent = time.monotonic()
        term.process.sendintr()
        code = term.finish()
        took = time.monotonic() - sent
    finally:
        term.close()
        sweep(*watch.stop())  # an exit at once leaves them to the next start's sweep
    assert code == 130
    assert took < 5  # at once, not after the stalled call or the clean-up bound
    assert "again: exiting at once" in "\n".join(term.lines())
    assert gone(started)
    assert "Traceback" not in term.raw.decode(errors="replace")


LEAKY_BINDINGS = '''
from host.tools import tool, Ask

@tool
def echo(text: str) -> str:
    """Print a text on the command's stdout, and return it."""
    print("echo:", text)
    return text

def setup_registry(registry):
    registry.pre_execute(lambda call, decision: Ask(f"echo {call.args['text']}"))
'''

# Every way a program's text reaches the screen, each marked with a window-title sequence.
LEAKY = """
import threading
def mark(path):
    return chr(27) + "]0;leak-" + path + chr(7)
print(mark("log"), flush=True)
await tools.echo(text=mark("tool"))
globals()[mark("name")] = threading.Lock()
return mark("value")
"""


def _shown(path: str) -> str:
    return f"\\x1b]0;leak-{path}\\x07"


def test_nothing_a_program_chose_reaches_the_terminal_unescaped(tmp_path: Path) -> None:
    tools = tmp_path / "leaky.py"
    tools.write_text(LEAKY_BINDINGS)
    session = tmp_path / "session.bin"
    program = _program(tmp_path, LEAKY)
    term = Terminal.start("run", str(program), "-b", str(tools), "--session", str(session))
    try:
        term.wait_for("allow echo? [y/N]:")
        term.process.send(b"y\r")
        assert term.finish() == 0
    finally:
        term.close()
    failing = _program(tmp_path, "raise ValueError(chr(27) + ']0;leak-error' + chr(7))")
    failed = Terminal.start("run", str(failing), "--session", str(session))
    try:
        assert failed.finish() == 1
    finally:
        failed.close()
    raw = bytes(term.raw + failed.raw)
    paths = ("log", "tool", "name", "value", "error")
    assert [path for path in paths if f"\x1b]0;leak-{path}".encode() in raw] == []
    assert b"\x1b]0;leak-" not in raw  # the prompt's included
    assert term.screen.title == failed.screen.title == ""
    screen = "\n".join(term.lines() + failed.lines())
    shown = [_shown(path) for path in ("log", "tool", "name", "error")]
    shown.append('"\\u001b]0;leak-value\\u0007"')  # the value as JSON writes it
    assert [text for text in shown if text not in screen] == [], screen
    assert f"echo {_shown('tool')} — allow echo? [y/N]: y" in screen  # the prompt, too
