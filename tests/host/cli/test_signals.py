"""Signals to a real ``dsh-code`` process: the run ends ``aborted``, nothing is left behind."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from host.cli._signals import abort_notice

from .support import ROOT, WorkdirWatch, cli, descendants, env, gone, handles, sweep, wait_until

pytestmark = pytest.mark.timeout(120)

FAULTY = ROOT / "tests" / "host" / "mcp" / "servers" / "faulty.py"
BINDINGS = ROOT / "tests" / "host" / "mcp" / "servers" / "bindings.py"

SLEEPER = """
import os, subprocess, time
subprocess.Popen(["sleep", "60"])
print("workdir", os.getcwd(), flush=True)
time.sleep(60)
"""

HUNG_MCP = """
import os
print("workdir", os.getcwd(), flush=True)
return await tools.mcp__faulty__hang()
"""


def _start(tmp_path: Path, program: str, *flags: str, **extra_env: str) -> subprocess.Popen[str]:
    path = tmp_path / "prog.py"
    path.write_text(program)
    return subprocess.Popen(
        cli("run", str(path), "-b", str(BINDINGS), *flags),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env(**extra_env),
    )


def _workdir(process: subprocess.Popen[str], *, json_output: bool = False) -> Path | None:
    """The run's directory, from the program's first line (read from the live output)."""
    if json_output:
        return None  # --json prints nothing until the end
    assert process.stdout is not None
    line = process.stdout.readline()
    assert line.startswith("workdir "), line
    return Path(line.split()[1])


def _kill(process: subprocess.Popen[str]) -> None:
    if process.poll() is None:
        process.kill()
    process.communicate()


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT])
def test_a_signal_aborts_the_run_and_cleans_up(tmp_path: Path, sig: signal.Signals) -> None:
    process = _start(tmp_path, SLEEPER, "--isolation", "process")
    try:
        workdir = _workdir(process)
        assert workdir is not None and workdir.is_dir()
        started = descendants(process.pid)
        assert started
        process.send_signal(sig)
        _, err = process.communicate(timeout=30)
    finally:
        _kill(process)
    assert process.returncode == 128 + sig
    assert f"interrupted by {sig.name}" in err
    assert "Traceback" not in err
    assert gone(started)
    assert not workdir.exists()


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP])
def test_json_output_of_a_signalled_run_is_one_aborted_object(
    tmp_path: Path, sig: signal.Signals
) -> None:
    log = tmp_path / "session.jsonl"
    program = "print('so far', flush=True)\nimport time\ntime.sleep(60)"
    process = _start(tmp_path, program, "--json", "--log", str(log))
    try:  # the session log is written as events happen: the host has the line
        assert wait_until(lambda: log.exists() and '"event":"log"' in log.read_text())
        process.send_signal(sig)
        out, err = process.communicate(timeout=30)
    finally:
        _kill(process)
    assert process.returncode == 128 + sig
    lines = out.splitlines()
    assert len(lines) == 1, out
    obj = json.loads(lines[0])
    assert obj["error"]["kind"] == "aborted"
    assert obj["error"]["message"] == f"interrupted by {sig.name}"
    assert obj["logs"] == ["so far"]
    assert "Traceback" not in err


def test_sigterm_with_a_hung_mcp_call_stops_the_mcp_server(tmp_path: Path) -> None:
    pidfile = tmp_path / "faulty.pid"
    process = _start(
        tmp_path,
        HUNG_MCP,
        "--mcp",
        f"faulty={sys.executable} {FAULTY} ok {pidfile}",
    )
    try:
        workdir = _workdir(process)
        assert workdir is not None
        server = int(pidfile.read_text())
        started = descendants(process.pid)
        assert server in started
        process.send_signal(signal.SIGTERM)
        _, err = process.communicate(timeout=30)
    finally:
        _kill(process)
    assert process.returncode == 143, err
    assert "Traceback" not in err
    assert gone(started)
    assert not workdir.exists()


def test_sigkill_leaves_no_mcp_server_or_template_running(tmp_path: Path) -> None:
    pidfile = tmp_path / "faulty.pid"
    process = _start(
        tmp_path,
        HUNG_MCP,
        "--mcp",
        f"faulty={sys.executable} {FAULTY} ok {pidfile}",
        "--isolation",
        "process",
    )
    watch = WorkdirWatch(process.pid)
    try:
        _workdir(process)
        started = descendants(process.pid)
        assert int(pidfile.read_text()) in started
        process.kill()
        process.communicate(timeout=30)
    finally:
        _kill(process)
        sweep(*watch.stop())  # left by SIGKILL: the next start sweeps them (the sandbox's job)
    assert gone(started, timeout=15)


@pytest.mark.parametrize("delay", [0.0, 0.05, 0.15, 0.3, 0.6, 1.0])
def test_a_signal_during_start_up_is_a_message_never_a_traceback(
    tmp_path: Path, delay: float
) -> None:
    process = _start(tmp_path, "import time\ntime.sleep(60)", "--json")
    try:
        # From the moment our handlers are installed (SIGTERM caught), at any point after.
        assert wait_until(lambda: process.poll() is not None or handles(process.pid, 15))
        time.sleep(delay)
        process.send_signal(signal.SIGINT)
        out, err = process.communicate(timeout=30)
    finally:
        _kill(process)
    assert process.returncode == 130, err
    assert "Traceback" not in err and "Exception ignored" not in err, err
    lines = out.splitlines()
    assert len(lines) == 1, out
    assert json.loads(lines[0])["error"]["kind"] == "aborted"


_DEAF_SYNC = (
    "import time\nfrom host.tools import tool\n\n@tool\ndef stall() -> int:\n"
    '    """Block a worker thread, deaf to the abort."""\n    time.sleep(120)\n    return 0\n'
)
_DEAF_ASYNC = (
    "import anyio\nfrom host.tools import tool\n\n@tool\nasync def stall() -> int:\n"
    '    """Shield itself from cancellation: the run\'s clean-up cannot end."""\n'
    "    with anyio.CancelScope(shield=True):\n        await anyio.sleep(120)\n    return 0\n"
)


def _stall_then_terminate(tmp_path: Path, tool_source: str) -> tuple[int, str, str, float]:
    """Run a program stuck in ``stall``, SIGTERM the command: (status, out, err, seconds)."""
    stall = tmp_path / "stall.py"
    stall.write_text(tool_source)
    path = tmp_path / "prog.py"
    path.write_text("import os\nprint(os.getcwd(), flush=True)\nreturn await tools.stall()")
    log = tmp_path / "session.jsonl"
    process = subprocess.Popen(
        cli(
            "run",
            str(path),
            "-b",
            str(stall),
            "--json",
            "--log",
            str(log),
            "--isolation",
            "process",
        ),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env(),
    )
    watch = WorkdirWatch(process.pid)
    try:
        # The call was dispatched: its body runs.
        assert wait_until(lambda: log.exists() and "code-dispatch-start" in log.read_text())
        started = descendants(process.pid)
        sent = time.monotonic()
        process.send_signal(signal.SIGTERM)
        out, err = process.communicate(timeout=60)
        took = time.monotonic() - sent
    finally:
        _kill(process)
        sweep(*watch.stop())  # the bound's exit at once leaves them to the next start's sweep
    assert gone(started)
    return process.returncode, out, err, took


def test_a_sync_tool_deaf_to_the_abort_does_not_hold_the_exit(tmp_path: Path) -> None:
    status, out, err, took = _stall_then_terminate(tmp_path, _DEAF_SYNC)
    assert status == 143
    assert took < 5, f"{took:.1f} s: the exit waited for the tool's thread"
    assert "clean-up took longer" not in err
    assert "thread is abandoned" in err
    assert json.loads(out)["error"]["kind"] == "aborted"


def test_a_clean_up_that_hangs_is_cut_short_by_the_bound(tmp_path: Path) -> None:
    status, out, err, took = _stall_then_terminate(tmp_path, _DEAF_ASYNC)
    assert status == 143
    assert 5 < took < 40  # the 10 s bound, not the tool's 120 s
    assert "clean-up took longer than 10 s" in err
    assert json.loads(out)["error"]["kind"] == "aborted"


def test_a_signal_while_the_json_object_is_written_leaves_it_whole(tmp_path: Path) -> None:
    size = 1_000_000  # far more than a pipe holds: the write waits for us to read
    process = _start(tmp_path, f"return 'x' * {size}", "--json", "--isolation", "process")
    try:
        assert process.stdout is not None
        head = process.stdout.read(1000)  # the object is being written, and cannot finish
        process.send_signal(signal.SIGINT)
        time.sleep(0.5)  # the handler has run: an exception would have cut the write here
        out = head + process.stdout.read()  # the rest, from the same buffered reader
        _, err = process.communicate(timeout=30)
    finally:
        _kill(process)
    lines = out.splitlines()
    assert len(lines) == 1, f"{len(out)} characters in {len(lines)} lines"
    assert json.loads(lines[0]) == {"logs": [], "value": "x" * size}
    assert process.returncode == 0, err  # the result was decided: the signal changes nothing
    assert "Traceback" not in err


def test_the_abort_notice_names_ctrl_c_only_for_sigint() -> None:
    assert abort_notice(signal.SIGINT) == (
        "dsh-code: SIGINT: aborting the run (Ctrl-C again exits at once)"
    )
    assert abort_notice(signal.SIGTERM) == (
        "dsh-code: SIGTERM: aborting the run (another SIGTERM exits at once)"
    )
    assert "Ctrl-C" not in abort_notice(signal.SIGHUP)
