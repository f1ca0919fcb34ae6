"""Per-run cgroups: an atomic kill, caps on processes and memory, and CPU accounting.

A run's processes join a cgroup of their own before the program starts (the child
writes itself into ``cgroup.procs`` files the host opened), in every hierarchy we can
write to: the unified (v2) one gives ``cgroup.kill`` (kills every process of the run
at once, however fast it forks) and ``cpu.stat`` (the busy CPU of every process the
run ever had, dead ones included); a ``pids`` controller caps how many processes and
threads the run may have; a ``memory`` controller caps the run's memory, shared
mappings and files in its tmpfs working directory included; a v1 ``cpu`` controller makes
the runs one scheduling group (a program with hundreds of busy processes then weighs, on
the CPU, no more than one process of the host, whose watchdog thread must keep running;
on a v2 host whose cgroup delegates ``cpu`` the unified hierarchy does this already).
Where none is writable (an unprivileged host without delegation), runs go without, as
before.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass

from runtime.lowlevel import process_cpu_ns

__all__ = ("CgroupSet", "RunCgroup", "parse_hierarchies", "runtime_prefix")

#: Memory a run may use beyond ``max_heap_mb``: its interpreter's copied pages, stacks,
#: page tables and kernel memory, across the up to three processes of a namespaced child.
MEMORY_HEADROOM = 64 * 1024 * 1024
_counter = itertools.count(1)
#: The v1 controllers we use, each in its own hierarchy (or sharing one: "cpu,cpuacct").
_V1_KINDS = ("pids", "memory", "cpu")
#: Sets of hierarchies (their "own" directories) a probe process joined: not probed again.
_joinable: set[tuple[str, ...]] = set()


@dataclass(frozen=True)
class Hierarchy:
    """One cgroup hierarchy we may use: ``kind`` is "unified", "pids", "memory" or "cpu";
    ``own`` is the directory of the cgroup this process is in."""

    kind: str
    own: str


def parse_hierarchies(mountinfo: str, proc_cgroup: str) -> list[Hierarchy]:
    """The hierarchies worth using, from /proc/self/mountinfo and /proc/self/cgroup."""
    ours: dict[str, str] = {}  # "unified" or a v1 controller -> our path in that hierarchy
    for line in proc_cgroup.splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        _, controllers, path = parts
        if parts[0] == "0" and controllers == "":
            ours["unified"] = path
        for name in controllers.split(","):
            if name in _V1_KINDS:
                ours[name] = path
    found: dict[str, Hierarchy] = {}
    for line in mountinfo.splitlines():
        head, sep, tail = line.partition(" - ")
        fields, rest = head.split(), tail.split()
        if not sep or len(fields) < 5 or len(rest) < 3:
            continue
        root, mount, fstype, options = fields[3], _unescape(fields[4]), rest[0], rest[2]
        if fstype == "cgroup2":
            kinds = ["unified"]
        elif fstype == "cgroup":
            given = options.split(",")
            kinds = [k for k in _V1_KINDS if k in given]  # ours first: one kind per mount
        else:
            continue
        for kind in kinds:
            if kind in found or kind not in ours:
                continue
            path = ours[kind]
            if root != "/":
                if not (path == root or path.startswith(root.rstrip("/") + "/")):
                    continue  # our cgroup is outside what this mount shows
                path = path[len(root.rstrip("/")) :]
            own = (mount.rstrip("/") + "/" + path.strip("/")).rstrip("/")
            if any(h.own == own for h in found.values()):
                continue  # co-mounted with a kind we took (cpu with memory): one join covers it
            found[kind] = Hierarchy(kind, own)
    return [found[k] for k in ("unified", *_V1_KINDS) if k in found]


def _unescape(path: str) -> str:
    # mountinfo escapes space, tab, newline and backslash as octal
    return path.encode().decode("unicode_escape") if "\\" in path else path


def _write(path: str, text: str) -> None:
    with open(path, "w") as f:
        f.write(text)


def _read(path: str) -> str:
    with open(path) as f:
        return f.read()


def _pid_namespace() -> str:
    """This process's PID namespace (its inode number), or "0" if unknown."""
    try:
        return str(os.stat("/proc/self/ns/pid").st_ino)
    except OSError:
        return "0"


def runtime_prefix(pid: int | None = None) -> str:
    """How the cgroups of a runtime in process ``pid`` (default: this one) are named.

    The PID namespace is part of the name: a pid means nothing in another one (processes
    in two containers may share a parent cgroup).
    """
    return f"dsh-code-{_pid_namespace()}-{os.getpid() if pid is None else pid}-"


def _remove_stale(own: str) -> None:
    """Remove the empty cgroups of runtimes of this PID namespace whose process is gone."""
    ours = f"dsh-code-{_pid_namespace()}-"
    with contextlib.suppress(OSError):
        for name in os.listdir(own):
            if not name.startswith(ours):
                continue
            try:
                pid = int(name[len(ours) :].split("-")[0])
                os.kill(pid, 0)
                continue  # its runtime is alive
            except ValueError:
                continue
            except ProcessLookupError:
                pass
            except OSError:
                continue
            base = os.path.join(own, name)
            with contextlib.suppress(OSError):
                for sub in os.listdir(base):
                    with contextlib.suppress(OSError):
                        os.rmdir(os.path.join(base, sub))
                os.rmdir(base)


class CgroupSet:
    """A runtime's cgroups: one directory per hierarchy, one sub-cgroup per child.

    A run's cgroup is reused by a later child once every process of the run is gone:
    making and removing one costs more than the rest of its use together.
    """

    def __init__(self, bases: dict[str, str], max_processes: int) -> None:
        self.bases = bases
        self.max_processes = max_processes
        self._free: list[RunCgroup] = []
        self._leftover: list[RunCgroup] = []
        #: Releases come from worker threads (never the event loop), several at a time.
        self._releasing = threading.Lock()

    @classmethod
    def create(cls, max_processes: int) -> tuple[CgroupSet | None, str]:
        """Make this runtime's cgroups where we may; (None, why not) if nowhere."""
        try:
            hierarchies = parse_hierarchies(
                _read("/proc/self/mountinfo"), _read("/proc/self/cgroup")
            )
        except OSError as exc:
            return None, f"cannot read this process's cgroups: {exc}"
        if not hierarchies:
            return None, "no cgroup hierarchy is mounted"
        name = f"{runtime_prefix()}{next(_counter)}"
        bases: dict[str, str] = {}
        problems: list[str] = []
        for h in hierarchies:
            _remove_stale(h.own)
            base = os.path.join(h.own, name)
            try:
                os.mkdir(base)
            except OSError as exc:
                problems.append(f"{h.kind}: {exc.strerror} ({base})")
                continue
            bases[h.kind] = base
        if "unified" not in bases and "pids" not in bases:
            for base in bases.values():
                with contextlib.suppress(OSError):
                    os.rmdir(base)
            return None, "; ".join(problems) or "no usable cgroup hierarchy"
        made = cls(bases, max_processes)
        key = tuple(sorted(h.own for h in hierarchies if h.kind in bases))
        if key not in _joinable:
            problem = made._probe()
            if problem:
                made.close()
                return None, problem
            _joinable.add(key)
        return made, ""

    def _probe(self) -> str:
        """Have a throwaway process join a run cgroup, as children will; why not, if it fails."""
        try:
            cgroup = self.new_run()
        except OSError as exc:
            return f"cannot make a run cgroup: {exc}"
        fds = cgroup.join_fds()
        script = f"import os\nfor fd in {fds!r}:\n    os.write(fd, b'0')"
        try:
            probe = subprocess.run(
                [sys.executable, "-I", "-S", "-c", script],
                pass_fds=fds,
                env={},
                stdin=subprocess.DEVNULL,
                capture_output=True,
                timeout=30,
                check=False,
            )
        except (OSError, subprocess.SubprocessError) as exc:
            self.release(cgroup)
            return f"cannot start the cgroup probe: {exc}"
        self.release(cgroup)
        if probe.returncode != 0:
            last = (probe.stderr.decode(errors="replace").strip().splitlines() or [""])[-1]
            return f"a process cannot join a run cgroup: {last or probe.returncode}"
        return ""

    @property
    def features(self) -> tuple[str, ...]:
        """What runs get: "kill", "cpu", "pids", "memory"."""
        out = []
        if "unified" in self.bases:
            out += ["kill", "cpu"]
        out += [k for k in ("pids", "memory") if k in self.bases]
        return tuple(out)

    def new_run(self) -> RunCgroup:
        """An empty cgroup (in every hierarchy) for one child. Raises OSError."""
        with contextlib.suppress(IndexError):  # another thread may take the last one
            return self._free.pop()
        name = f"run-{next(_counter)}"
        made: dict[str, str] = {}
        try:
            for kind, base in self.bases.items():
                path = os.path.join(base, name)
                os.mkdir(path)
                made[kind] = path
            if "pids" in made:
                _write(made["pids"] + "/pids.max", str(self.max_processes))
            elif os.path.exists(made.get("unified", "") + "/pids.max"):
                _write(made["unified"] + "/pids.max", str(self.max_processes))
            return RunCgroup(made)
        except OSError:
            RunCgroup.remove_paths(made)
            raise

    def release(self, cgroup: RunCgroup) -> None:
        """Keep a run's cgroup for a later child once it is empty, else remove it later."""
        with self._releasing:
            self._leftover = [c for c in self._leftover if not c.remove()]
            if cgroup.populated():  # a run that outlived its settle timeout, or a lost spare
                cgroup.kill()
                if not cgroup.remove():
                    self._leftover.append(cgroup)
                return
            cgroup.rebase()
            self._free.append(cgroup)

    def close(self) -> None:
        """Remove every cgroup we made (after the runs are gone)."""
        self._leftover += self._free
        self._free = []
        deadline = time.monotonic() + 2.0
        while self._leftover:
            self._leftover = [c for c in self._leftover if not c.remove()]
            if not self._leftover or time.monotonic() > deadline:
                break
            time.sleep(0.005)
        for base in self.bases.values():
            with contextlib.suppress(OSError):
                for sub in os.listdir(base):  # a run whose release its ending loop cut short
                    if sub.startswith("run-"):
                        with contextlib.suppress(OSError):
                            os.rmdir(os.path.join(base, sub))
                os.rmdir(base)


class RunCgroup:
    """One child's cgroup, a directory per hierarchy, with the files we use kept open."""

    def __init__(self, paths: dict[str, str]) -> None:
        self.paths = paths
        self._memory_limit: int | None = None
        self._oom_base = 0
        self._fds: dict[str, int] = {}
        try:
            for kind, path in paths.items():
                self._fds["join-" + kind] = _open(path + "/cgroup.procs", os.O_WRONLY)
            if "unified" in paths:
                self._fds["cpu"] = _open(paths["unified"] + "/cpu.stat", os.O_RDONLY)
                self._fds["events"] = _open(paths["unified"] + "/cgroup.events", os.O_RDONLY)
                # read and written at every run's end: kept open (one syscall, not three)
                self._fds["procs"] = _open(paths["unified"] + "/cgroup.procs", os.O_RDONLY)
                with contextlib.suppress(OSError):  # cgroup.kill: Linux 5.14 and later
                    # Written on the event loop when a run settles: a kernel control file
                    # (it signals, it never waits for I/O), so O_NONBLOCK says what it is.
                    self._fds["kill"] = _open(
                        paths["unified"] + "/cgroup.kill", os.O_WRONLY | os.O_NONBLOCK
                    )
            if "memory" in paths:
                self._fds["oom"] = _open(paths["memory"] + "/memory.oom_control", os.O_RDONLY)
            elif os.path.exists(paths.get("unified", "") + "/memory.events"):
                self._fds["oom"] = _open(paths["unified"] + "/memory.events", os.O_RDONLY)
        except OSError:
            self._close_fds()
            raise

    def join_fds(self) -> list[int]:
        """``cgroup.procs`` of every hierarchy, open for writing: the child writes "0" to
        each to join. Still ours: the caller sends copies and does not close them."""
        return [fd for key, fd in self._fds.items() if key.startswith("join-")]

    def watch_fds(self) -> list[int]:
        """``cpu.stat``, ``cgroup.procs`` (and ``cgroup.kill``) for the template's watch over
        the run's budgets; [] without a unified hierarchy. Still ours: the caller sends copies."""
        if "cpu" not in self._fds or "procs" not in self._fds:
            return []
        return [self._fds[k] for k in ("cpu", "procs", "kill") if k in self._fds]

    def caps_memory_at(self, heap_bytes: int) -> bool:
        """True if the cgroup is already capped for a heap of ``heap_bytes``."""
        return self._memory_limit == heap_bytes + MEMORY_HEADROOM

    def limit_memory(self, heap_bytes: int) -> None:
        """Cap the run's memory at ``heap_bytes`` plus headroom (no-op without a controller)."""
        limit = heap_bytes + MEMORY_HEADROOM
        if limit == self._memory_limit:
            return
        if "memory" in self.paths:
            memory = self.paths["memory"] + "/memory.limit_in_bytes"
            with_swap = self.paths["memory"] + "/memory.memsw.limit_in_bytes"
            # memory + swap must stay >= memory: raise it first, lower it last (a new
            # cgroup starts unlimited, so its first limit lowers both)
            order = [memory, with_swap]
            if self._memory_limit is not None and limit > self._memory_limit:
                order.reverse()
            for path in order:
                if path == memory or os.path.exists(path):
                    _write(path, str(limit))
            # v1 counts socket buffers apart, and only once a limit is set: bound them too
            with contextlib.suppress(OSError):
                _write(
                    self.paths["memory"] + "/memory.kmem.tcp.limit_in_bytes", str(_tcp_limit(limit))
                )
        elif os.path.exists(self.paths.get("unified", "") + "/memory.max"):
            _write(self.paths["unified"] + "/memory.max", str(limit))
            with contextlib.suppress(OSError):
                _write(self.paths["unified"] + "/memory.swap.max", "0")
        self._memory_limit = limit

    def _pread(self, key: str) -> bytes | None:
        fd = self._fds.get(key)
        if fd is None:
            return None
        try:
            return os.pread(fd, 4096, 0)
        except OSError:
            return None

    def cpu_ns(self) -> int | None:
        """Busy CPU of every process that was ever in the cgroup (None: not measured)."""
        data = self._pread("cpu")
        if data is None:
            return None
        # "usage_usec N\n..." is the first line
        return int(data.split(b"\n", 1)[0].split()[1]) * 1000

    def live_cpu_ns(self) -> int:
        """Busy CPU of the cgroup's live processes, from their own clocks: exact to the
        nanosecond, where ``cpu_ns`` is only as fresh as the last scheduler tick (4 ms here)."""
        return sum(process_cpu_ns(pid) for pid in self.procs())

    def _oom_count(self) -> int:
        for line in (self._pread("oom") or b"").splitlines():
            key, _, value = line.partition(b" ")
            if key == b"oom_kill":
                return int(value)
        return 0

    def oom_kills(self) -> int:
        """How many processes the kernel killed for passing the memory cap, this run."""
        return self._oom_count() - self._oom_base

    def rebase(self) -> None:
        """Start counting OOM kills afresh (for the cgroup's next child)."""
        self._oom_base = self._oom_count()

    def procs(self) -> list[int]:
        """The pids in the cgroup (as the host sees them)."""
        fd = self._fds.get("procs")
        if fd is not None:
            try:
                chunks, offset = [], 0
                while chunk := os.pread(fd, 65536, offset):
                    chunks.append(chunk)
                    offset += len(chunk)
                return [int(p) for p in b"".join(chunks).split()]
            except (OSError, ValueError):
                pass
        for path in self.paths.values():
            try:
                return [int(p) for p in _read(path + "/cgroup.procs").split()]
            except (OSError, ValueError):
                continue
        return []

    def populated(self) -> bool:
        """True while a live process is in the cgroup."""
        events = self._pread("events")
        if events is not None:
            return b"populated 1" in events
        return bool(self.procs())

    def kill(self) -> None:
        """SIGKILL every process in the cgroup: atomically with ``cgroup.kill``, else by
        killing what is listed until nothing is (``pids.max`` bounds a fork bomb)."""
        if "kill" in self._fds:
            try:
                os.write(self._fds["kill"], b"1")
                return
            except OSError:
                pass
        for _ in range(100):
            pids = self.procs()
            if not pids:
                return
            for pid in pids:
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)

    def _close_fds(self) -> None:
        for fd in self._fds.values():
            os.close(fd)
        self._fds = {}

    def remove(self) -> bool:
        """Remove the directories; False if some remain (a process is still exiting)."""
        self._close_fds()
        self.paths = self.remove_paths(self.paths)
        return not self.paths

    @staticmethod
    def remove_paths(paths: dict[str, str]) -> dict[str, str]:
        """rmdir each; returns those that remain."""
        left = {}
        for kind, path in paths.items():
            try:
                os.rmdir(path)
            except FileNotFoundError:
                pass
            except OSError:
                left[kind] = path
        return left


def _tcp_limit(memory_limit: int) -> int:
    """What a run's TCP buffers may hold on a v1 memory controller (v2 counts them in the
    memory cap itself): the headroom, at most."""
    return min(memory_limit, MEMORY_HEADROOM)


def _open(path: str, flags: int) -> int:
    return os.open(path, flags | os.O_CLOEXEC)
