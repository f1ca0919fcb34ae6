"""Process facts from /proc: ProcStat follows one process, stopped or not, until it is gone."""

from __future__ import annotations

import signal
import subprocess
import sys
import time

from runtime._procs import ProcStat


def _wait_for(predicate: object, timeout: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():  # type: ignore[operator]
            return True
        time.sleep(0.005)
    return False


def _sleeper() -> subprocess.Popen[bytes]:
    # a real process of its own (never a fork of the test process)
    return subprocess.Popen([sys.executable, "-c", "import signal; signal.pause()"])


def test_proc_stat_sees_a_stop_and_a_continue_then_nothing_once_reaped() -> None:
    proc = _sleeper()
    stat = ProcStat(proc.pid)
    try:
        assert not stat.stopped()
        proc.send_signal(signal.SIGSTOP)
        assert _wait_for(stat.stopped)
        proc.send_signal(signal.SIGCONT)
        assert _wait_for(lambda: not stat.stopped())
        proc.kill()
        proc.wait()
        assert not stat.stopped()  # gone: the open file does not follow a reused pid
    finally:
        stat.close()
        stat.close()  # idempotent
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert not stat.stopped()


def test_proc_stat_of_a_process_that_does_not_exist() -> None:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    stat = ProcStat(proc.pid)
    assert not stat.stopped()
    stat.close()
