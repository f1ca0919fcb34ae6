"""The host's handle on the template process: start it, ask it to fork, close it."""

from __future__ import annotations

import array
import json
import os
import socket
import struct
import subprocess
import sys
from typing import Any

import anyio
import msgspec

from host.sandbox._fdio import close_fd
from runtime import RuntimeEnvironmentError
from runtime.lowlevel import ProcStat, TemplateConfig, descendants, is_stopped, watch_request

__all__ = ("TemplateProcess", "TemplateStartError")

_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_BOOT = (
    "import sys; sys.path.insert(0, sys.argv[1]); "
    "from runtime._template import main, run_child; "
    "run_child(main(int(sys.argv[2]), sys.argv[3]))"
)
_UID = struct.Struct("!I")
_NO_UID = 0xFFFFFFFF


class TemplateStartError(RuntimeEnvironmentError):
    """The template process did not start, did not say READY in time, or cannot give the
    isolation level asked for."""


class TemplateProcess:
    """A started template: forks children on request; dies when its socket closes."""

    def __init__(
        self,
        python: str = sys.executable,
        config: TemplateConfig | None = None,
        start_timeout: float = 30.0,
        hash_seed: int = 0,
    ) -> None:
        self._python = python
        self._config = config or TemplateConfig()
        self._requested = self._config.isolation
        self.hash_seed = hash_seed
        """The template's (so every child's) hash seed: ``PYTHONHASHSEED``, 0 for a random one."""
        self.isolation = "process"
        """The level the template settled on (set by ``start``)."""
        self.why_not_namespaces = ""
        self.facts: dict[str, Any] = {}
        """What the template settled for every child (its READY message)."""
        self._start_timeout = start_timeout
        self._sock: socket.socket | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._stat: ProcStat | None = None
        self._send_lock = anyio.Lock()

    @property
    def alive(self) -> bool:
        """True while the process runs and its socket is open."""
        proc = self._proc
        return (
            proc is not None
            and self._sock is not None
            and proc.poll() is None
            and not (self._stat is not None and self._stat.stopped())  # SIGSTOPped: replace it
        )

    @property
    def ready(self) -> bool:
        """True once the template said READY."""
        return bool(self.facts)

    @property
    def pid(self) -> int | None:
        """The template's pid, once started."""
        return self._proc.pid if self._proc is not None else None

    def _spawn(self, theirs: socket.socket) -> subprocess.Popen[bytes]:
        """The template process, on the socket's other end (run in a worker thread)."""
        return subprocess.Popen(
            [
                self._python,
                # -I but for -E: the environment holds PYTHONHASHSEED alone
                "-s",
                "-P",
                "-c",
                _BOOT,
                _ROOT,
                str(theirs.fileno()),
                msgspec.json.encode(self._config).decode(),
            ],
            pass_fds=(theirs.fileno(),),
            env={"PYTHONHASHSEED": str(self.hash_seed)} if self.hash_seed else {},
            cwd="/",
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            start_new_session=True,
        )

    async def start(self) -> None:
        """Spawn the template with an empty environment and wait for its READY byte."""
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        ours.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 16)
        try:
            # Off the event loop (Popen forks, execs and reads its error pipe), shielded so
            # the process is ours even if the caller is cancelled meanwhile.
            with anyio.CancelScope(shield=True):
                self._proc = proc = await anyio.to_thread.run_sync(self._spawn, theirs)
        except OSError as exc:
            ours.close()
            raise TemplateStartError(f"cannot start the template process: {exc}") from exc
        finally:
            theirs.close()
        self._stat = ProcStat(proc.pid)
        ours.setblocking(False)
        self._sock = ours
        with anyio.move_on_after(self._start_timeout):
            while True:
                await anyio.wait_readable(ours)
                try:
                    ready = ours.recv(65536)
                except BlockingIOError:
                    continue
                if ready.startswith(b"R:"):
                    try:
                        self.facts = json.loads(ready[2:])
                    except ValueError:
                        break
                    self.isolation = str(self.facts.get("isolation", "process"))
                    self.why_not_namespaces = str(self.facts.get("why_not_namespaces", ""))
                    level, why_not = self.isolation, self.why_not_namespaces
                    if self._requested == "namespaces" and level != "namespaces":
                        await self.aclose()
                        raise TemplateStartError(
                            f"isolation='namespaces' is not available here: {why_not}"
                        )
                    failed = self.facts.get("preload_errors") or {}
                    if failed:
                        await self.aclose()
                        raise TemplateStartError(
                            "preload: "
                            + "; ".join(
                                f"cannot import {name}: {why}" for name, why in failed.items()
                            )
                        )
                    return
                break
        await self.aclose()
        raise TemplateStartError("the template process did not become ready")

    async def fork(self, fds: list[int], uid: int | None = None) -> None:
        """Ask for one child wired to ``fds`` (ctl_in, ctl_out, log_w, status_w, then the
        cgroup.procs files it joins), to run as ``uid`` (None: the template's own)."""
        sock = self._sock
        if sock is None:
            raise BrokenPipeError("the template process is closed")
        message = b"F" + _UID.pack(_NO_UID if uid is None else uid)
        payload = [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds).tobytes())]
        async with self._send_lock:
            while True:
                try:
                    sock.sendmsg([message], payload)
                    return
                except BlockingIOError:
                    await anyio.wait_writable(sock)

    def watch(
        self, pid: int, deadline: float, budget_ns: int, fds: list[int], locate_ms: int = 0
    ) -> bool:
        """Ask the template to enforce a run's budgets (any thread; no wait): its wall
        ``deadline`` (monotonic s), compute ``budget_ns`` from now, its cgroup's fds
        (``RunCgroup.watch_fds``), and ``locate_ms`` for the program to say where it is
        before the kill; False if the request could not be sent now."""
        sock = self._sock
        if sock is None:
            return False
        payload = [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds).tobytes())]
        try:
            request = watch_request(pid, deadline, budget_ns, locate_ms)
            sock.sendmsg([request], payload if fds else [])
        except OSError:
            return False
        return True

    def kill_uid(self, uid: int) -> bool:
        """Ask the template to SIGKILL every process of ``uid`` (any thread; no wait for it);
        False if the request could not be sent now."""
        sock = self._sock
        if sock is None:
            return False
        try:
            sock.send(b"K" + _UID.pack(uid))
        except OSError:
            return False
        return True

    async def aclose(self) -> None:
        """Close the socket (the template kills its children and exits), reap it, and wait
        until every process below it has exited too."""
        proc = self._proc
        watched: list[int] = []
        if proc is not None and proc.poll() is None:
            for pid in descendants(proc.pid)[1:]:
                try:
                    watched.append(os.pidfd_open(pid))
                except OSError:
                    pass
        sock, self._sock = self._sock, None
        if sock is not None:
            try:
                anyio.notify_closing(sock)
            except Exception:
                pass
            sock.close()
        try:
            if proc is not None:
                if proc.poll() is None and (is_stopped(proc.pid) or not self.ready):
                    # stopped, it would never read the EOF; starting, it is not reading yet
                    proc.kill()
                with anyio.move_on_after(5.0):
                    while proc.poll() is None:
                        await anyio.sleep(0.005)
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
            with anyio.move_on_after(5.0):  # SIGKILLed (directly or by PDEATHSIG): soon gone
                for fd in watched:
                    await anyio.wait_readable(fd)
        finally:
            for fd in watched:
                close_fd(fd)
            if self._stat is not None:
                self._stat.close()
