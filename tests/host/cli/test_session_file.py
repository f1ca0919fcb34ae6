"""``dsh-code run --session FILE``: state carried between invocations, kept in a file safely."""

from __future__ import annotations

import json
import os
import pickle
import stat
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from host.cli._app import app
from host.cli._session_file import (
    SessionFileError,
    read_session_file,
    write_session_file,
)

from .support import run

pytestmark = pytest.mark.timeout(120)
runner = CliRunner()

TOOLS = '''
from host.tools import tool

@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b
'''

FIRST = """
import functools, dataclasses, json
counter = 41
def make(k):
    def times(x):
        return x * k
    return times
triple = make(3)
square = lambda x: x * x
def logged(f):
    @functools.wraps(f)
    def inner(*a):
        return ['logged', f(*a)]
    return inner
@logged
def hello(name):
    return f'hello {name}'
@dataclasses.dataclass
class Point:
    x: int
    y: int
p = Point(3, -4)
total = await tools.add(a=counter, b=1)
"""

SECOND = """
return [total, triple(2), square(5), hello('you'), repr(p), json.dumps({'k': counter})]
"""


@pytest.fixture
def tools(tmp_path: Path) -> Path:
    path = tmp_path / "tools.py"
    path.write_text(TOOLS)
    return path


def _program(tmp_path: Path, text: str, name: str = "prog.py") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def _json(tmp_path: Path, tools: Path, state: Path, text: str, *flags: str) -> tuple[int, Any]:
    result = runner.invoke(
        app,
        [
            "run",
            str(_program(tmp_path, text)),
            "-b",
            str(tools),
            "--json",
            "--session",
            str(state),
            *flags,
        ],
    )
    lines = [line for line in result.stdout.splitlines() if line.strip()]
    assert len(lines) == 1, result.output
    return result.exit_code, json.loads(lines[0])


def test_two_invocations_in_a_row_chain_through_the_file(tmp_path: Path, tools: Path) -> None:
    state = tmp_path / "agent.state"
    first = run(
        "run", str(_program(tmp_path, FIRST, "one.py")), "-b", str(tools), "--session", str(state)
    )
    assert first.returncode == 0, first.stderr
    assert stat.S_IMODE(state.stat().st_mode) == 0o600
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".agent")] == []  # no temp
    second = run(
        "run",
        str(_program(tmp_path, SECOND, "two.py")),
        "-b",
        str(tools),
        "--session",
        str(state),
        "--json",
    )
    assert second.returncode == 0, second.stderr
    assert json.loads(second.stdout)["value"] == [
        42,
        6,
        25,
        ["logged", "hello you"],
        "Point(x=3, y=-4)",
        '{"k": 41}',
    ]
    alone = run("run", str(_program(tmp_path, "'total' in globals()", "three.py")), "--json")
    assert json.loads(alone.stdout)["value"] is False  # no --session: nothing carried


def test_a_failed_run_leaves_the_file_as_it_was(tmp_path: Path, tools: Path) -> None:
    state = tmp_path / "s.state"
    assert _json(tmp_path, tools, state, "n = 1")[0] == 0
    before = state.read_bytes()
    inode = state.stat().st_ino
    code, out = _json(tmp_path, tools, state, "n = 2\nraise ValueError('no')")
    assert code == 1 and out["error"]["kind"] == "exception"
    assert state.read_bytes() == before and state.stat().st_ino == inode
    assert _json(tmp_path, tools, state, "n")[1]["value"] == 1


def test_a_file_that_is_not_a_state_fails_only_the_run(tmp_path: Path, tools: Path) -> None:
    state = tmp_path / "s.state"
    state.write_bytes(b"this is not a state blob\n")
    code, out = _json(tmp_path, tools, state, "return 1")
    assert code == 1, out
    assert out["error"]["kind"] == "state"
    assert "cannot be restored" in out["error"]["message"]
    assert state.read_bytes() == b"this is not a state blob\n"  # left alone
    plain = runner.invoke(app, ["run", str(_program(tmp_path, "1")), "--session", str(state)])
    assert plain.exit_code == 1
    assert f"the state in {state} cannot be used; remove the file" in plain.stderr

    assert _json(tmp_path, tools, tmp_path / "good.state", "kept = [1, 2]")[0] == 0
    blob = (tmp_path / "good.state").read_bytes()
    state.write_bytes(blob[: len(blob) // 2])  # a cut (tampered) blob
    code, out = _json(tmp_path, tools, state, "return kept")
    assert (code, out["error"]["kind"]) == (1, "state")


def test_a_tampered_state_runs_only_inside_the_child(tmp_path: Path, tools: Path) -> None:
    marker = tmp_path / "pwned"

    class Evil:
        def __reduce__(self) -> Any:
            return (os.system, (f"touch {marker}",))

    state = tmp_path / "s.state"
    state.write_bytes(pickle.dumps({"x": Evil()}))
    _json(tmp_path, tools, state, "return 1")
    assert not marker.exists()  # never unpickled here; the child cannot write there


def test_json_output_names_what_was_not_carried(tmp_path: Path, tools: Path) -> None:
    state = tmp_path / "s.state"
    code, out = _json(tmp_path, tools, state, "kept = 1\ngen = (i for i in range(3))")
    assert code == 0
    assert set(out["state_dropped"]) == {"gen"}
    assert "generator" in out["state_dropped"]["gen"]
    plain = runner.invoke(
        app,
        ["run", str(_program(tmp_path, "again = (i for i in [])")), "--session", str(state)],
    )
    assert plain.exit_code == 0
    assert "not carried to the next run" in plain.stderr and "again:" in plain.stderr
    code, out = _json(tmp_path, tools, state, "kept")
    assert (code, out) == (0, {"value": 1, "logs": []})  # nothing dropped: no key


def test_a_state_file_over_the_cap_fails_the_run(tmp_path: Path, tools: Path) -> None:
    state = tmp_path / "s.state"
    state.write_bytes(b"x" * 5000)
    code, out = _json(tmp_path, tools, state, "return 1", "--max-state-bytes", "4096")
    assert (code, out["error"]["kind"]) == (1, "state")
    assert "--max-state-bytes (4096)" in out["error"]["message"]
    code, out = _json(
        tmp_path, tools, tmp_path / "new.state", "big = 'y' * 10000", "--max-state-bytes", "4096"
    )
    assert (code, out["error"]["kind"]) == (1, "state")
    assert not (tmp_path / "new.state").exists()


@pytest.mark.parametrize("kind", ["symlink", "directory", "fifo", "no folder"])
def test_a_session_path_it_must_not_use_is_a_usage_error(
    tmp_path: Path, tools: Path, kind: str
) -> None:
    state = tmp_path / "s.state"
    target = tmp_path / "elsewhere"
    target.write_bytes(b"precious")
    if kind == "symlink":
        state.symlink_to(target)
    elif kind == "directory":
        state.mkdir()
    elif kind == "fifo":
        os.mkfifo(state)
    else:
        state = tmp_path / "missing" / "s.state"
    result = runner.invoke(
        app,
        [
            "run",
            str(_program(tmp_path, "x = 1")),
            "-b",
            str(tools),
            "--session",
            str(state),
            "--json",
        ],
    )
    assert result.exit_code == 2, result.output
    assert json.loads(result.stdout)["error"]["kind"] == "usage"
    assert "Traceback" not in result.output
    assert target.read_bytes() == b"precious"


def test_writing_replaces_a_link_planted_meanwhile_and_never_follows_it(tmp_path: Path) -> None:
    state = tmp_path / "s.state"
    target = tmp_path / "target"
    target.write_bytes(b"precious")
    state.symlink_to(target)
    write_session_file(state, b"new state")
    assert not state.is_symlink() and state.read_bytes() == b"new state"
    assert target.read_bytes() == b"precious"
    assert stat.S_IMODE(state.stat().st_mode) == 0o600
    (tmp_path / "d").mkdir()
    with pytest.raises(SessionFileError, match="directory"):
        write_session_file(tmp_path / "d", b"x")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["d", "s.state", "target"]


def test_reading_is_bounded_and_a_missing_file_is_a_new_session(tmp_path: Path) -> None:
    assert read_session_file(tmp_path / "nothing", 10) is None
    big = tmp_path / "big"
    big.write_bytes(b"z" * 100)
    assert read_session_file(big, 10) == b"z" * 11  # enough to know it is over
    assert read_session_file(big, 100) == b"z" * 100
