"""The template process: imports what a child needs once, then forks one child per run.

It never runs a program. At start it settles what every child gets (the isolation level,
the seccomp filter, on a root host a read-only view of the file system and the uid programs
run as) and says so in its READY message, JSON after ``b"R:"``. The host talks to it over a
SOCK_SEQPACKET socket: each request is ``b"F"`` with five fds (ctl_in, ctl_out, log_w,
status_w, where_w: the pipe a stack dump goes to at a budget), then up to four
``cgroup.procs`` files the child joins before anything else.
The template forks; it writes ``b"P" + pid`` on status_w, and ``b"X" + exit status`` once it
has reaped the child and killed whatever the run left behind. EOF on the socket means the
host is gone: every child is killed and the template exits.
"""

from __future__ import annotations

import array
import ctypes
import gc
import json
import os
import select
import signal
import socket
import struct
import sys
import time
from typing import Any

from runtime._child import ChildSetup, child_main, run_child  # imported once: forks start warm
from runtime._contain import (
    enter_namespaces,
    enter_pid_namespace,
    hide_cgroups,
    interpreter_paths,
    landlock_abi,
    make_mounts_private,
    make_root_read_only,
    mount_proc,
    new_pid_namespace_for_children,
    reveal_paths,
    unshare_mounts_and_ipc,
    unshare_network,
    unshare_run_namespaces,
)
from runtime._privileges import become
from runtime._procs import children, kill_tree
from runtime._program import compile_program
from runtime._seccomp import build_filter

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
_PR_SET_NO_NEW_PRIVS = 38
_INT = struct.Struct("!i")
_FDS_PER_RUN = 5
_MAX_JOIN = 4  # cgroup.procs files: unified, pids, memory, cpu


_UNFREED: list[object] = []


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
        # forking each child as PID 1 of a new PID namespace: the one to come back to after
        self._own_pid_ns = (
            os.open("/proc/self/ns/pid", os.O_RDONLY | os.O_CLOEXEC) if setup.direct else -1
        )

    def fork(self, fds: list[int]) -> None:
        ctl_in, ctl_out, log_w, status_w, where_w, *join = fds
        if self.setup.direct:
            new_pid_namespace_for_children()
        try:
            pid = os.fork()
        finally:
            if self.setup.direct and pid != 0:
                enter_pid_namespace(self._own_pid_ns)  # else the next one would nest in it
        if pid == 0:
            # Leave the template's frames first: the program's first frame is then as near
            # the bottom of the stack as a script's (the boot line calls run_child).
            raise _Forked(ctl_in, ctl_out, log_w, os.getppid(), self.setup, join, status_w, where_w)
        for fd in (ctl_in, ctl_out, log_w, where_w, *join):
            os.close(fd)
        self.runs[pid] = status_w
        try:
            os.write(status_w, b"P" + _INT.pack(pid))
        except OSError:  # the host gave up on this run already
            pass

    def reap(self) -> None:
        """Collect exited children; for a run, sweep strays first, then report its status."""
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
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
            strays = [p for p in children(os.getpid()) if p not in self.runs]
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


def _probe_namespaces(uid: int | None) -> str | None:
    """Try the namespaces level in a throwaway child, as a child would enter it (as ``uid``,
    when given); None if it works, else why not."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        try:
            libc = ctypes.CDLL(None)
            libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
            if uid is not None:
                become(uid, uid)
            enter_namespaces()
            inner = os.fork()
            if inner == 0:
                try:
                    make_mounts_private()
                    make_root_read_only()
                    hide_cgroups()
                    mount_proc()
                except BaseException as exc:
                    os.write(w, str(exc).encode()[:500])
                    os._exit(1)
                os._exit(0)
            _, status = os.waitpid(inner, 0)
            os._exit(os.waitstatus_to_exitcode(status) & 0xFF)
        except BaseException as exc:
            os.write(w, str(exc).encode()[:500])
            os._exit(1)
    os.close(w)
    _, status = os.waitpid(pid, 0)
    with os.fdopen(r, "rb") as f:
        reason = f.read().decode(errors="replace")
    if os.waitstatus_to_exitcode(status) == 0:
        return None
    return reason or f"the probe exited with status {os.waitstatus_to_exitcode(status)}"


def _probe_direct() -> str | None:
    """Try the namespaces level without a user namespace (a root host) in a throwaway child:
    a new PID namespace for a grandchild, which makes its own namespaces and /proc; None if
    that works, else why not."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        try:
            new_pid_namespace_for_children()
            inner = os.fork()
            if inner == 0:
                try:
                    unshare_run_namespaces(network=False)
                    mount_proc()
                except BaseException as exc:
                    os.write(w, str(exc).encode()[:500])
                    os._exit(1)
                os._exit(0 if os.getpid() == 1 else 2)
            _, status = os.waitpid(inner, 0)
            os._exit(os.waitstatus_to_exitcode(status) & 0xFF)
        except BaseException as exc:
            os.write(w, str(exc).encode()[:500])
            os._exit(1)
    os.close(w)
    _, status = os.waitpid(pid, 0)
    with os.fdopen(r, "rb") as f:
        reason = f.read().decode(errors="replace")
    if os.waitstatus_to_exitcode(status) == 0:
        return None
    return reason or f"the probe exited with status {os.waitstatus_to_exitcode(status)}"


def _make_view(uid: int | None) -> str:
    """On a root host: a mount namespace of the template's own, inherited by every child,
    read-only, the host's cgroup tree hidden, and the interpreter reachable for ``uid``.
    Returns why not ("" when done)."""
    try:
        unshare_mounts_and_ipc()
        make_root_read_only()
        hide_cgroups()
        if uid is not None:
            reveal_paths(interpreter_paths(), uid, uid)
    except OSError as exc:
        return str(exc)
    return ""


def _settle(requested: str, run_uid: int | None) -> tuple[ChildSetup, dict[str, object]]:
    """What every child gets here, and the facts the host reports."""
    root = os.geteuid() == 0
    uid = run_uid if root and run_uid else None
    why_not_view = _make_view(uid) if root else "the host is not root"
    view = not why_not_view
    if uid is not None and not view:
        uid = None  # the interpreter may not be reachable for it: stay the host's uid, no caps
    isolation, why_not, direct = "process", "", False
    if requested in ("namespaces", "auto"):
        problem = _probe_direct() if view else "no read-only view to inherit"
        direct = problem is None
        if not direct:
            problem = _probe_namespaces(uid)
            if problem is not None and uid is not None and _probe_namespaces(None) is None:
                problem, uid = None, None  # no unprivileged user namespaces: root mapped 1:1
        if problem is None:
            isolation = "namespaces"
        else:
            why_not = problem
    # One empty network namespace for every run, where Landlock (ABI 6) keeps their
    # abstract unix sockets apart; its loopback is down and no program may bring it up.
    shared_network = direct and landlock_abi() >= 6
    if shared_network:
        try:
            unshare_network()
        except OSError:
            shared_network = False
    private = isolation == "process" and view
    seccomp, why_not_seccomp = build_filter(deny_ipc=isolation == "process" and not private)
    setup = ChildSetup(
        isolation=isolation,
        private=private,
        view=view,
        uid=uid,
        gid=uid,
        seccomp=seccomp,
        direct=isolation == "namespaces" and direct,
        shared_network=isolation == "namespaces" and shared_network,
    )
    facts = {
        "isolation": isolation,
        "why_not_namespaces": why_not,
        "seccomp": bool(seccomp),
        "why_not_seccomp": why_not_seccomp,
        "read_only_root": view or isolation == "namespaces",
        "why_not_read_only_root": "" if view or isolation == "namespaces" else why_not_view,
        "uid": uid,
        "processes_per_run": 2 if setup.direct else 3 if isolation == "namespaces" else 1,
        "shared_network": setup.shared_network,
    }
    return setup, facts


def main(
    sock_fd: int,
    requested: str = "process",
    run_uid: int | None = None,
    preload: tuple[str, ...] = (),
) -> Any:
    """The template's loop: READY, then fork on request, reap on SIGCHLD, exit on EOF.

    ``requested`` is "process", "namespaces" or "auto"; ``run_uid`` the uid programs run as
    on a root host (None: root itself, without capabilities); ``preload`` modules to import
    once for every child. READY says what we settled on. Returns only in a forked child: the
    program to run (pass it to ``run_child``).
    """
    try:
        _serve(sock_fd, requested, run_uid, preload)
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


def _serve(sock_fd: int, requested: str, run_uid: int | None, preload: tuple[str, ...]) -> None:
    for name in _WARM:
        __import__(name)
    compile_program("1")  # warms the compiler's own caches
    import runtime._state  # noqa: F401 - a session's serializer (cloudpickle), loaded once here

    preloaded = _preload(preload) if preload else {}

    # Python's C-locale coercion sets LC_CTYPE at start-up; a child's environment is empty.
    os.environ.clear()
    libc = ctypes.CDLL(None)
    libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    sock = socket.socket(fileno=sock_fd)
    setup, facts = _settle(requested, run_uid)
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
        try:
            events = poller.poll()
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
                    16, socket.CMSG_SPACE((_FDS_PER_RUN + _MAX_JOIN) * fds.itemsize)
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
            if msg == b"F" and _FDS_PER_RUN <= len(fds) <= _FDS_PER_RUN + _MAX_JOIN:
                template.fork(list(fds))
            else:
                for stray in fds:
                    os.close(stray)
        template.reap()


if __name__ == "__main__":
    run_child(
        main(
            int(sys.argv[1]),
            sys.argv[2] if len(sys.argv) > 2 else "process",
            int(sys.argv[3]) if len(sys.argv) > 3 and sys.argv[3] != "-" else None,
            tuple(filter(None, sys.argv[4].split(","))) if len(sys.argv) > 4 else (),
        )
    )
