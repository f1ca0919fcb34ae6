"""Fixtures for the subprocess backend: a runtime per test, and a leak check around it."""

from __future__ import annotations

import contextlib
import functools
import os
import platform
import tempfile
from collections.abc import AsyncIterator, Iterator
from typing import Any

import psutil
import pytest

from host.sandbox import SubprocessRuntime, TypeScriptRuntime
from host.sandbox._cgroup import CgroupSet, parse_hierarchies, runtime_prefix
from host.sandbox._options import default_workdir_root
from tests.conftest import ALL_BACKENDS


@pytest.fixture(params=ALL_BACKENDS)
def anyio_backend(request: pytest.FixtureRequest) -> object:
    """The sandbox under asyncio as anyio runs it, as plain ``asyncio.run`` runs it, and trio."""
    return request.param


def open_fds(*, but_cgroups: bool = False) -> set[int]:
    """The host's open fds (``but_cgroups``: not counting files of cgroups, which a runtime
    keeps open for the cgroups it reuses)."""
    found = set()
    for name in os.listdir("/proc/self/fd"):
        if but_cgroups:
            try:
                if os.readlink(f"/proc/self/fd/{name}").startswith("/sys/fs/cgroup/"):
                    continue
            except OSError:
                continue
        found.add(int(name))
    return found


def live_children(pid: int) -> list[psutil.Process]:
    """The live (not zombie) direct children of ``pid``; [] if it is gone. A child that exits
    while we look is not counted (it is not live)."""
    try:
        children = psutil.Process(pid).children()
    except psutil.NoSuchProcess:
        return []
    live = []
    for child in children:
        try:
            if child.status() != psutil.STATUS_ZOMBIE:
                live.append(child)
        except psutil.NoSuchProcess:
            continue
    return live


_SIGKILL_BIT = 1 << (9 - 1)
_PF_EXITING = 0x4
#: exit and exit_group by architecture: a task inside them never returns to user space.
_EXIT_SYSCALLS = {"x86_64": {"60", "231"}, "aarch64": {"93", "94"}}.get(platform.machine(), set())


def can_still_run(pid: int) -> bool:
    """True if process ``pid`` may still execute code: it is alive, not a zombie, not exiting
    and no SIGKILL is pending for it (a killed process never returns to user space)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
        if fields[0] in (b"Z", b"X") or int(fields[6]) & _PF_EXITING:
            return False
        with open(f"/proc/{pid}/status", "rb") as f:
            status = f.read()
    except (OSError, IndexError):
        return False
    for line in status.splitlines():
        key, _, value = line.partition(b":")
        if key in (b"SigPnd", b"ShdPnd") and int(value.strip(), 16) & _SIGKILL_BIT:
            return False
    # A process that called exit_group just before the kill: the kernel drops a SIGKILL sent
    # to a group already exiting, and PF_EXITING comes a few steps into the exit, so a task
    # preempted between the two shows neither (the likely cause of one failure under load,
    # right after a child's own exit that follows its report; not reproduced).
    try:
        with open(f"/proc/{pid}/syscall", "rb") as f:
            return f.read().split(b" ", 1)[0].decode() not in _EXIT_SYSCALLS
    except (OSError, UnicodeDecodeError):
        return True


async def settled(rt: SubprocessRuntime) -> None:
    """Until what the runtime releases after its runs returned (fds, directories,
    cgroups, exited processes) is released."""
    await rt._background.wait()


@functools.cache
def unprivileged_runs_here() -> bool:
    """True if programs here run as an unprivileged uid (a root host that may make the
    template's read-only view: a mount namespace of its own)."""
    if os.geteuid() != 0:
        return False
    pid = os.fork()
    if pid == 0:
        import ctypes

        os._exit(0 if ctypes.CDLL(None).unshare(0x00020000) == 0 else 1)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status) == 0


@functools.cache
def cgroups_here() -> tuple[tuple[str, ...], str]:
    """What per-run cgroups give runs on this host, and why none if so (probed once)."""
    made, why_not = CgroupSet.create(64)
    if made is None:
        return (), why_not
    made.close()
    return made.features, ""


def our_cgroups() -> list[str]:
    """The cgroup directories runtimes of this test process made and have not removed."""
    with open("/proc/self/mountinfo") as m, open("/proc/self/cgroup") as c:
        hierarchies = parse_hierarchies(m.read(), c.read())
    prefix = runtime_prefix()
    found = []
    for h in hierarchies:
        try:
            found += [os.path.join(h.own, n) for n in os.listdir(h.own) if n.startswith(prefix)]
        except OSError:
            continue
    return found


@pytest.fixture
def workdir_root() -> Iterator[str]:
    """A root for this test's run directories only (other test processes share /dev/shm)."""
    root = tempfile.mkdtemp(prefix="dsh-test-", dir=default_workdir_root())
    os.chmod(root, 0o711)  # on a root host programs run as an unprivileged uid: let it search
    yield root
    leftovers = os.listdir(root)
    os.rmdir(root) if not leftovers else None
    assert leftovers == [], "a run left its working directory behind"


@pytest.fixture(params=["namespaces", "process"])
def isolation(request: pytest.FixtureRequest) -> str:
    """Each runtime test runs at both isolation levels."""
    return str(request.param)


@contextlib.asynccontextmanager
async def checked_runtime(
    workdir_root: str, kind: type[SubprocessRuntime] = SubprocessRuntime, **options: Any
) -> AsyncIterator[SubprocessRuntime]:
    """A fresh runtime (``kind``); after it closes, nothing it started may be left (processes,
    dirs, cgroups, fds)."""
    runtime = kind(workdir_root=workdir_root, **options)
    fds_before = open_fds()
    async with runtime:
        yield runtime
    assert psutil.Process().children(recursive=True) == []
    assert os.listdir(workdir_root) == []
    assert our_cgroups() == []
    assert open_fds() - fds_before == set()


@pytest.fixture
async def rt(workdir_root: str, isolation: str) -> AsyncIterator[SubprocessRuntime]:
    """A fresh runtime; after the test, nothing it started may be left (processes, dirs, fds)."""
    async with checked_runtime(workdir_root, isolation=isolation) as runtime:
        yield runtime


@pytest.fixture
async def ts(workdir_root: str, isolation: str) -> AsyncIterator[TypeScriptRuntime]:
    """A fresh TypeScript runtime, with the same leak check as ``rt``."""
    async with checked_runtime(workdir_root, TypeScriptRuntime, isolation=isolation) as runtime:
        assert isinstance(runtime, TypeScriptRuntime)
        yield runtime
