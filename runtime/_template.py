"""The template process: imports what a child needs once, then forks one child per run.

It never runs a program. At start it settles what every child gets (``runtime._settle``:
the isolation level, the seccomp filter, on a root host a read-only view of the file system
and everything children would otherwise each give up) and says so in its READY message,
JSON after ``b"R:"``. The host talks to it over a SOCK_SEQPACKET socket: each fork request is
``b"F"`` and the run's uid (4 bytes), with five fds (ctl_in, ctl_out, log_w, status_w,
where_w: the pipe a stack dump goes to at a budget), then up to four ``cgroup.procs`` files
the child joins before anything else; ``b"K"`` and a uid kills every process of that uid;
``b"W"`` asks it to enforce a run's budgets (``runtime._budgets``). The template forks; it
writes ``b"P" + pid`` on status_w, and ``b"X" + exit status`` once it has reaped the child
and killed whatever the run left behind. EOF on the socket means the host is gone: every
child is killed and the template exits.
"""

from __future__ import annotations

import array
import ctypes
import gc
import json
import math
import os
import select
import signal
import socket
import struct
import sys
import time
from typing import Any

import msgspec

from runtime._budgets import WATCH, Budgets, Watch
from runtime._child import ChildSetup, child_main, run_child  # imported once: forks start warm
from runtime._procs import children, kill_tree
from runtime._program import compile_program
from runtime._settle import settle
from runtime._wire import TemplateConfig

# Modules programs reach for: imported once here, so a child finds them loaded.
_WARM = (
    "collections",
    "dataclasses",
    "datetime",
    "decimal",
    "fractions",
    "functools",
    "itertools",
    "json",
    "math",
    "random",
    "re",
    "statistics",
    "string",
    "textwrap",
    "time",
    "typing",
)

__all__ = ("main", "run_child")

_PR_SET_CHILD_SUBREAPER = 36
_INT = struct.Struct("!i")
_FDS_PER_RUN = 5
_MAX_JOIN = 4  # cgroup.procs files: unified, pids, memory, cpu
_FDS_MAX = _FDS_PER_RUN + _MAX_JOIN
#: A fork request: b"F" and the run's uid (_NO_UID: the template's own, without capabilities);
#: b"K" and a uid: kill every process of that uid.
_UID = struct.Struct("!I")
_NO_UID = 0xFFFFFFFF


_UNFREED: list[object] = []


_libc = ctypes.CDLL(None, use_errno=True)


class _Forked(BaseException):  # a way out of the template's loop, not an error
    """Raised in a freshly forked child: the arguments of ``child_main``."""

    def __init__(self, *args: object) -> None:
        super().__init__()
        self.args = args


class _Template:
    """The fork server's state: live runs by pid, their status fds."""

    def __init__(self, sock: socket.socket, setup: ChildSetup) -> None:
        self.sock = sock
        self.setup = setup
        self.runs: dict[int, int] = {}  # pid -> status_w fd
        self.uids: dict[int, int] = {}  # pid -> the run's own uid (a per-run uid only)
        self.killers: set[int] = set()  # kill_uid's processes: not strays to sweep
        self.budgets = Budgets(self.kill_uid)

    def fork(self, fds: list[int], uid: int | None) -> None:
        ctl_in, ctl_out, log_w, status_w, where_w, *join = fds
        pid = os.fork()
        if pid == 0:
            # Leave the template's frames first: the program's first frame is then as near
            # the bottom of the stack as a script's (the boot line calls run_child).
            raise _Forked(ctl_in, ctl_out, log_w, os.getppid(), self.setup, join, uid, where_w)
        for fd in (ctl_in, ctl_out, log_w, where_w, *join):
            os.close(fd)
        self.runs[pid] = status_w
        if uid is not None and self.setup.per_run_uid:
            self.uids[pid] = uid
        try:
            os.write(status_w, b"P" + _INT.pack(pid))
        except OSError:  # the host gave up on this run already
            pass

    def kill_uid(self, uid: int) -> None:
        """SIGKILL every process of ``uid`` at once: a killer of that uid signals all it may
        (``kill(-1)`` holds the task list while it walks it, so no fork can slip through)."""
        pid = os.fork()
        if pid == 0:
            try:
                os.setresgid(uid, uid, uid)
                os.setresuid(uid, uid, uid)
                os.kill(-1, signal.SIGKILL)
            finally:
                os._exit(0)
        self.killers.add(pid)

    def watch(self, message: bytes, fds: list[int]) -> None:
        """Enforce a run's budgets from now (``b"W"``: see ``runtime._budgets``)."""
        pid, deadline, budget_ns, locate_ms = WATCH.unpack(message)
        status_w = self.runs.get(pid)
        if status_w is None or len(fds) > 3:
            for fd in fds:
                os.close(fd)
            return
        watch = Watch(pid, deadline, budget_ns, status_w, self.uids.get(pid), fds, locate_ms)
        self.budgets.watch(watch, time.monotonic())

    def reap(self) -> None:
        """Collect exited children; for a run, sweep strays first, then report its status."""
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            self.killers.discard(pid)
            self.budgets.forget(pid)
            self.uids.pop(pid, None)
            status_w = self.runs.pop(pid, None)
            if status_w is None:
                continue  # a stray we killed, or one that died on its own
            self.sweep()
            try:
                os.write(status_w, b"X" + _INT.pack(os.waitstatus_to_exitcode(status)))
            except OSError:
                pass
            os.close(status_w)

    def sweep(self) -> None:
        """Kill every child of ours that is not a live run: leftovers of settled runs."""
        deadline = time.monotonic() + 1.0
        while time.monotonic() < deadline:
            strays = [
                p for p in children(os.getpid()) if p not in self.runs and p not in self.killers
            ]
            if not strays:
                return
            for pid in strays:
                kill_tree(pid)
            for pid in strays:
                try:
                    os.waitpid(pid, 0)
                except ChildProcessError:
                    pass

    def shutdown(self) -> None:
        for pid in list(self.runs):
            kill_tree(pid)
        for pid in children(os.getpid()):
            kill_tree(pid)
        end = time.monotonic() + 2.0
        while self.runs and time.monotonic() < end:
            self.reap()
            time.sleep(0.001)
        os._exit(0)


def main(sock_fd: int, config_json: str = "{}") -> Any:
    """The template's loop: READY, then fork on request, reap on SIGCHLD, exit on EOF.

    ``config_json`` is a ``TemplateConfig``. READY says what we settled on. Returns only in a
    forked child: the program to run (pass it to ``run_child``).
    """
    try:
        _serve(sock_fd, msgspec.json.decode(config_json, type=TemplateConfig))
    except _Forked as forked:
        # Kept, with the template's frames it holds: freeing them in a child would only copy
        # the pages it shares with the template (a copy-on-write fault for each).
        _UNFREED.append(forked)
        try:
            return child_main(*forked.args)
        except BaseException:
            os._exit(71)
    except BrokenPipeError:
        os._exit(0)  # the host left while we started: nothing to say, nobody to say it to
    except BaseException as exc:  # a line on the host's stderr, not a traceback
        os.write(2, f"dsh-code template: {type(exc).__name__}: {exc}\n".encode(errors="replace"))
        os._exit(1)
    os._exit(0)


#: Native libraries a preloaded module may start threads for: one thread each (a fork copies
#: only the thread that forks; a pool of them would not be there in the child).
_SINGLE_THREADED = (
    "OPENBLAS_NUM_THREADS",
    "OMP_NUM_THREADS",
    "MKL_NUM_THREADS",
    "NUMEXPR_NUM_THREADS",
)


_PR_SET_MM, _PR_SET_MM_ENV_START, _PR_SET_MM_ENV_END = 35, 10, 11


def _forget_environment() -> None:
    """Empty what ``/proc/<pid>/environ`` shows of us, and so of every child (the host starts
    us with ``PYTHONHASHSEED`` alone, which programs have no business reading): the area
    made empty where we may (``CAP_SYS_RESOURCE``), else its bytes zeroed."""
    try:
        with open("/proc/self/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
        start, end = int(fields[47]), int(fields[48])  # env_start, env_end (stat(5) 50, 51)
    except (OSError, ValueError, IndexError):
        return
    if end <= start:
        return
    if _libc.prctl(_PR_SET_MM, _PR_SET_MM_ENV_END, ctypes.c_ulong(start), 0, 0) == 0:
        return
    ctypes.memset(start, 0, end - start)


def _preload(modules: tuple[str, ...]) -> dict[str, object]:
    """Import ``modules`` for every child; what went wrong, and what the imports left."""
    errors: dict[str, str] = {}
    fds_before = set(os.listdir("/proc/self/fd"))
    for key in _SINGLE_THREADED:
        os.environ[key] = "1"
    for name in modules:
        try:
            __import__(name)
        except BaseException as exc:  # an import is arbitrary code: report, never crash
            errors[name] = f"{type(exc).__name__}: {exc}"[:500]
    threads = len(os.listdir("/proc/self/task"))
    opened = len(set(os.listdir("/proc/self/fd")) - fds_before)
    return {"preload_errors": errors, "preload_threads": threads - 1, "preload_fds": opened}


def _serve(sock_fd: int, config: TemplateConfig) -> None:
    for name in _WARM:
        __import__(name)
    compile_program("1")  # warms the compiler's own caches
    import runtime._state  # noqa: F401 - a session's serializer (cloudpickle), loaded once here

    preload = tuple(config.preload)
    preloaded = _preload(preload) if preload else {}

    # Python's C-locale coercion sets LC_CTYPE at start-up; a child's environment is empty.
    os.environ.clear()
    _forget_environment()
    libc = ctypes.CDLL(None)
    libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    sock = socket.socket(fileno=sock_fd)
    setup, facts = settle(config)
    facts.update(preloaded, preload=list(preload))
    template = _Template(sock, setup)
    wake_r, wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
    signal.set_wakeup_fd(wake_w, warn_on_full_buffer=False)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)  # the host ends us by closing the socket
    # Everything imported so far is shared with every child: keep the collector off those
    # pages, or a child's first collection would copy them all (copy-on-write faults are slow).
    gc.freeze()
    sock.sendall(b"R:" + json.dumps(facts).encode()[:60000])
    poller = select.poll()
    poller.register(sock, select.POLLIN)
    poller.register(wake_r, select.POLLIN)
    while True:
        due = template.budgets.look(time.monotonic())
        try:
            events = poller.poll(None if due is None else math.ceil(due * 1000))
        except InterruptedError:
            continue
        for fd, _ in events:
            if fd == wake_r:
                try:
                    while os.read(wake_r, 4096):
                        pass
                except BlockingIOError:
                    pass
                template.reap()
                continue
            fds = array.array("i")
            try:
                msg, ancdata, _flags, _addr = sock.recvmsg(
                    64, socket.CMSG_SPACE(_FDS_MAX * fds.itemsize)
                )
            except InterruptedError:
                continue
            except OSError:
                template.shutdown()
            for level, kind, data in ancdata:
                if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                    fds.frombytes(data[: len(data) - (len(data) % fds.itemsize)])
            if not msg:
                template.shutdown()
            if msg[:1] == b"F" and len(msg) == 5 and _FDS_PER_RUN <= len(fds) <= _FDS_MAX:
                uid = _UID.unpack(msg[1:])[0]
                template.fork(list(fds), None if uid == _NO_UID else uid)
                continue
            if msg[:1] == b"W" and len(msg) == 1 + WATCH.size:
                template.watch(msg[1:], list(fds))
                continue
            for stray in fds:
                os.close(stray)
            if msg[:1] == b"K" and len(msg) == 5:
                template.kill_uid(_UID.unpack(msg[1:])[0])
        template.reap()


if __name__ == "__main__":
    run_child(main(int(sys.argv[1]), sys.argv[2] if len(sys.argv) > 2 else "{}"))
