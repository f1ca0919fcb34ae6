"""Process-tree facts from /proc: descendants, busy CPU time, and killing a whole run."""

from __future__ import annotations

import os
import signal
import time

__all__ = (
    "ProcStat",
    "children",
    "descendants",
    "is_stopped",
    "kill_tree",
    "process_cpu_ns",
    "tree_cpu_ns",
)

_CPUCLOCK_SCHED = 2
_NS_PER_TICK = 1_000_000_000 // os.sysconf("SC_CLK_TCK")


def children(pid: int) -> list[int]:
    """Direct children of ``pid`` (every thread's), or [] if it is gone."""
    found: list[int] = []
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return found
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/children", "rb") as f:
                found.extend(int(p) for p in f.read().split())
        except OSError:
            continue
    return found


def descendants(root: int) -> list[int]:
    """``root`` and every process below it, parents before children."""
    order: list[int] = []
    todo, seen = [root], set()
    while todo:
        pid = todo.pop()
        if pid in seen:
            continue
        seen.add(pid)
        order.append(pid)
        todo.extend(children(pid))
    return order


def process_cpu_ns(pid: int) -> int:
    """The CPU clock of process ``pid`` (all its threads), in ns; 0 if it is gone. One syscall."""
    try:
        return time.clock_gettime_ns(((~pid) << 3) | _CPUCLOCK_SCHED)
    except OSError:
        return 0


def _reaped_children_ns(pid: int) -> int:
    # cutime + cstime: CPU of descendants that ``pid`` has already waited for (clock ticks).
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
        return (int(fields[13]) + int(fields[14])) * _NS_PER_TICK
    except (OSError, IndexError, ValueError):
        return 0


def _stopped_state(stat: bytes) -> bool:
    try:
        state = stat.rsplit(b")", 1)[1].split()[0]
    except IndexError:
        return False
    return state in (b"T", b"t")


class ProcStat:
    """One process's ``/proc/<pid>/stat``, kept open: whether it is stopped, in one pread.

    The open file names that process, not its pid: once it is reaped, reads fail, and a
    process that reuses the pid is never read instead.
    """

    def __init__(self, pid: int) -> None:
        try:
            self._fd = os.open(f"/proc/{pid}/stat", os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            self._fd = -1

    def stopped(self) -> bool:
        """True if the process is stopped (SIGSTOP) or traced; False once it is gone."""
        if self._fd < 0:
            return False
        try:
            return _stopped_state(os.pread(self._fd, 512, 0))
        except OSError:
            return False

    def close(self) -> None:
        """Close the file (idempotent)."""
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


def is_stopped(pid: int) -> bool:
    """True if ``pid`` is stopped (SIGSTOP) or traced: it will not answer until continued."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return _stopped_state(f.read())
    except OSError:
        return False


def tree_cpu_ns(root: int) -> int:
    """Busy CPU time of ``root`` and every process it started, live or already reaped."""
    return sum(process_cpu_ns(p) + _reaped_children_ns(p) for p in descendants(root))


def kill_tree(root: int, root_pidfd: int | None = None, *, watch: bool = False) -> list[int]:
    """SIGKILL ``root``'s process group and every descendant; gone processes are ignored.

    With ``root_pidfd`` the root is signalled through it, so a reused pid is never hit.
    With ``watch``, returns pidfds of the killed descendants (the caller waits for them
    to turn readable, i.e. exit, then closes them); otherwise [].
    """
    pids = descendants(root)
    watched: list[int] = []
    if watch:
        for pid in pids[1:]:
            try:
                watched.append(os.pidfd_open(pid))
            except OSError:
                pass
    if root_pidfd is not None:
        try:
            signal.pidfd_send_signal(root_pidfd, signal.SIGKILL)
        except OSError:
            return watched  # the root is gone: its pid (and so its group id) may be reused
    try:
        os.killpg(root, signal.SIGKILL)
    except OSError:
        pass
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    return watched
