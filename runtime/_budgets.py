"""The template's watch over runs' budgets: a process the host's interpreter cannot delay.

The host's watchdog is a thread of the host's interpreter: a long decode, a busy tool
written in Python or a blocked event loop holding the GIL delays it. The template is a
process of its own with nothing else to do between forks, so the host asks it to watch each
run from its first billed moment (``b"W"``: the run's pid, its wall deadline on the
monotonic clock shared by every process, its compute budget, and its cgroup's ``cpu.stat``,
``cgroup.procs`` and ``cgroup.kill`` when it has them). At a budget the template writes
``b"B"`` and the budget (1: wall, 2: compute) on the run's status pipe, then kills the run;
the host, however late it looks, finds the reason before it finds the death.
"""

from __future__ import annotations

import os
import select
import signal
import struct
from collections.abc import Callable
from dataclasses import dataclass, field

from runtime._procs import kill_tree, process_cpu_ns, tree_cpu_ns

__all__ = ("BUDGET_KINDS", "COMPUTE", "WALL", "WATCH", "Budgets", "Watch", "watch_request")

#: A watch request after its b"W": pid, wall deadline (monotonic s), compute budget (ns), and
#: how long (ms) the program may take to write where it is before the kill.
WATCH = struct.Struct("!idqi")
WALL, COMPUTE = 1, 2
#: The budget a ``b"B"`` record names.
BUDGET_KINDS = {WALL: "wall", COMPUTE: "compute"}
_CPUS = os.cpu_count() or 1
_POLL_MIN_S = 0.00025
_POLL_MAX_S = 0.05


def watch_request(pid: int, deadline: float, budget_ns: int, locate_ms: int = 0) -> bytes:
    """The host's ``b"W"`` request for a run (its cgroup's fds go with it)."""
    return b"W" + WATCH.pack(pid, deadline, budget_ns, locate_ms)


@dataclass
class Watch:
    """One run's budgets, as the template sees them."""

    pid: int
    deadline: float
    budget_ns: int
    status_w: int
    uid: int | None  # the run's own uid (its processes are all of it), else None
    fds: list[int] = field(default_factory=list)  # cpu.stat, cgroup.procs[, cgroup.kill]
    locate_ms: int = 0
    base_ns: int = 0
    next_look: float = 0.0

    def cpu_ns(self) -> int:
        """Busy CPU of the run's processes: the cgroup's count (dead ones included) or the
        live processes' own clocks, whichever says more; without a cgroup, its tree's."""
        if len(self.fds) < 2:
            return tree_cpu_ns(self.pid)
        try:
            counted = int(os.pread(self.fds[0], 4096, 0).split(b"\n", 1)[0].split()[1]) * 1000
            pids = [int(p) for p in os.pread(self.fds[1], 65536, 0).split()]
        except (OSError, IndexError, ValueError):
            return 0
        return max(counted, sum(process_cpu_ns(p) for p in pids))

    def kill(self, kill_uid: Callable[[int], None]) -> None:
        """SIGKILL every process of the run."""
        if len(self.fds) > 2:
            try:
                os.write(self.fds[2], b"1")
                return
            except OSError:
                pass
        kill_tree(self.pid)
        if self.uid is not None:
            kill_uid(self.uid)  # what left the tree is still of the run's uid

    def close(self) -> None:
        for fd in self.fds:
            try:
                os.close(fd)
            except OSError:
                pass
        self.fds = []


class Budgets:
    """Every watched run, by pid; ``look`` enforces what is due and says when to look next."""

    def __init__(self, kill_uid: Callable[[int], None]) -> None:
        self.watches: dict[int, Watch] = {}
        self._kill_uid = kill_uid

    def watch(self, watch: Watch, now: float) -> None:
        """Enforce ``watch`` from now (its compute counted from here)."""
        self.forget(watch.pid)
        watch.base_ns = watch.cpu_ns()
        watch.next_look = now
        self.watches[watch.pid] = watch

    def forget(self, pid: int) -> None:
        """The run's child is gone: stop watching it."""
        watch = self.watches.pop(pid, None)
        if watch is not None:
            watch.close()

    def look(self, now: float) -> float | None:
        """Expire what is due; the seconds until the next look (None: nothing to watch)."""
        soonest: float | None = None
        for watch in list(self.watches.values()):
            if watch.next_look <= now:
                self._look(watch, now)
            if watch.pid in self.watches:
                soonest = watch.next_look if soonest is None else min(soonest, watch.next_look)
        return None if soonest is None else max(soonest - now, 0.0)

    def _look(self, watch: Watch, now: float) -> None:
        if now >= watch.deadline:
            return self._expire(watch, WALL)
        used = watch.cpu_ns() - watch.base_ns
        if used >= watch.budget_ns:
            return self._expire(watch, COMPUTE)
        # the run cannot burn faster than every CPU at once: half the time it would take
        pause = min(max((watch.budget_ns - used) / 1e9 / _CPUS / 2, _POLL_MIN_S), _POLL_MAX_S)
        watch.next_look = min(watch.deadline, now + pause)
        return None

    def _expire(self, watch: Watch, budget: int) -> None:
        try:  # the reason first: the death it causes must not read as the program's own
            os.write(watch.status_w, b"B" + struct.pack("!i", budget))
        except OSError:
            pass
        _ask_where(watch.pid, watch.locate_ms)
        watch.kill(self._kill_uid)
        self.forget(watch.pid)


def _ask_where(pid: int, wait_ms: int) -> None:
    """SIGXCPU to the run's process group: the program writes its stacks where the host
    reads them (faulthandler, at C level) and dies of it; wait at most ``wait_ms`` for that."""
    if wait_ms <= 0:
        return
    try:
        pidfd = os.pidfd_open(pid)
    except OSError:
        return  # gone already
    try:
        os.killpg(pid, signal.SIGXCPU)
        exited = select.poll()
        exited.register(pidfd, select.POLLIN)
        exited.poll(wait_ms)
    except OSError:
        pass
    finally:
        os.close(pidfd)
