"""Process facts from /proc: ProcStat follows one process, stopped or not, until it is gone."""

from __future__ import annotations

import os
import signal
import time

from runtime._procs import ProcStat


def _wait_for(predicate: object, timeout: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():  # type: ignore[operator]
            return True
        time.sleep(0.005)
    return False


def test_proc_stat_sees_a_stop_and_a_continue_then_nothing_once_reaped() -> None:
    pid = os.fork()
    if pid == 0:
        signal.pause()
        os._exit(0)
    stat = ProcStat(pid)
    try:
        assert not stat.stopped()
        os.kill(pid, signal.SIGSTOP)
        assert _wait_for(stat.stopped)
        os.kill(pid, signal.SIGCONT)
        assert _wait_for(lambda: not stat.stopped())
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        assert not stat.stopped()  # gone: the open file does not follow a reused pid
    finally:
        stat.close()
        stat.close()  # idempotent
    assert not stat.stopped()


def test_proc_stat_of_a_process_that_does_not_exist() -> None:
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)
    stat = ProcStat(pid)
    assert not stat.stopped()
    stat.close()
