"""Uids of a runtime's runs on a root host: one of its own for each run (and spare) at a time.

The kernel counts much by uid alone: pending signals, inotify instances, processes, pipe
buffers, message queues, and who may signal, trace or re-prioritise whom. Runs that shared a
uid could starve or reach each other through any of them; each run here has its own. A
runtime holds its uids with a file lock each (in ``/run/dsh-code/uids``, else the temporary
directory), so runtimes of other processes on the machine take others; what a dead runtime
left running under a uid is killed when the uid is taken.
"""

from __future__ import annotations

import collections
import contextlib
import fcntl
import os
import signal
import tempfile

from runtime import RuntimeEnvironmentError

__all__ = ("DEFAULT_UIDS", "UidPool")

#: Where runs' uids come from unless the caller says: far above the uids of people and
#: services, below 2**31 (some tools read a uid as a signed int).
DEFAULT_UIDS = range(2_100_000_000, 2_100_065_536)


def _lock_dir() -> str:
    for base in ("/run", tempfile.gettempdir()):
        path = os.path.join(base, "dsh-code", "uids")
        try:
            os.makedirs(path, mode=0o700, exist_ok=True)
            if os.stat(path).st_uid == os.geteuid():
                return path
        except OSError:
            continue
    raise RuntimeEnvironmentError("no directory for the run uids' locks (/run or the temp dir)")


def _kill_leftovers(uids: set[int]) -> None:
    """SIGKILL processes running as one of ``uids`` (left by a runtime that died)."""
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        with contextlib.suppress(OSError):
            if os.stat(f"/proc/{name}").st_uid in uids:
                os.kill(int(name), signal.SIGKILL)


class UidPool:
    """The uids this runtime holds; ``take`` one for a child, ``give`` it back once every
    process of its run is gone (the oldest given back is taken first)."""

    def __init__(self, candidates: range, size: int) -> None:
        self._candidates = candidates
        self._size = size
        self._locks: dict[int, int] = {}  # uid -> the fd holding its lock
        self._free: collections.deque[int] = collections.deque()

    @property
    def uids(self) -> list[int]:
        """The uids held (sorted)."""
        return sorted(self._locks)

    def open(self) -> None:
        """Lock ``size`` uids no other runtime holds. Raises ``RuntimeEnvironmentError``."""
        if self._locks:
            return
        directory = _lock_dir()
        for uid in self._candidates:
            if len(self._locks) == self._size:
                break
            fd = os.open(
                os.path.join(directory, str(uid)), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600
            )
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                os.close(fd)
                continue  # another runtime's
            self._locks[uid] = fd
        if len(self._locks) < self._size:
            self.close()
            raise RuntimeEnvironmentError(
                f"fewer than {self._size} uids of {self._candidates} are free for runs (other "
                "runtimes hold the rest): pass run_as_uid=range(...) with more"
            )
        _kill_leftovers(set(self._locks))
        self._free.extend(self.uids)

    def take(self) -> int:
        """A uid no live run of this runtime has. Raises ``RuntimeError`` if none is free."""
        if not self._free:
            raise RuntimeError("no run uid is free (every one is held by a run or a spare)")
        return self._free.popleft()

    def give(self, uid: int) -> None:
        """``uid``'s run is over and its processes are gone."""
        if uid in self._locks and uid not in self._free:
            self._free.append(uid)

    def close(self) -> None:
        """Let other runtimes have the uids."""
        for fd in self._locks.values():
            os.close(fd)
        self._locks = {}
        self._free.clear()
