"""Helpers for the adversarial suite: run a hostile program, then prove the host is still fine."""

from __future__ import annotations

import json
import os
import secrets
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import Any

import anyio
import psutil
import pytest

from host.sandbox import SubprocessRuntime
from runtime import Binding, Limits, RunRequest, RunResult
from runtime._contain import landlock_abi
from tests.conftest import PlainAsyncioLoop
from tests.host.sandbox.conftest import (
    can_still_run,
    cgroups_here,
    live_children,
    unprivileged_runs_here,
)

__all__ = (
    "HOSTILE",
    "ISOLATIONS",
    "LANDLOCK_ABI",
    "ONE_BACKEND",
    "PROC_HELPERS",
    "REPO",
    "PeakRss",
    "SeparateHost",
    "Stalls",
    "bridge_helpers",
    "echo",
    "expect",
    "gap",
    "kill_marked",
    "kind_of",
    "live_marked",
    "loop_stalls",
    "new_mark",
    "pids",
    "prelude",
    "probe_is_clean",
    "run_hostile",
    "run_in_separate_host",
)

#: Small budgets for hostile programs: they must settle fast.
HOSTILE = Limits(compute_ms=500, max_wall_ms=3_000, max_output_bytes=1 << 20, max_heap_mb=128)

#: Expensive cases (budgets, bombs, floods) run under one backend only: asyncio as plain
#: ``asyncio.run`` runs it (what most callers have).
ONE_BACKEND = pytest.mark.parametrize(
    "anyio_backend",
    [pytest.param(("asyncio", {"loop_factory": PlainAsyncioLoop}), id="asyncio-plain")],
)

ISOLATIONS = ["namespaces", "process"]
NO_PID_NAMESPACE = (
    "missing isolation at the process level: no PID namespace (nor user namespace); the child "
    "runs as the host's uid and sees, reads and signals every process of that uid"
)

#: Landlock (applied at every level, best effort) closes some process-level gaps: ptrace and
#: /proc/<pid>/mem, fdinfo and fd of processes outside the domain from ABI 1, signals from 6.
LANDLOCK_ABI = landlock_abi()
#: What per-run cgroups give runs on this host (what SubprocessRuntime() would use).
RUNTIME_CGROUPS, WHY_NOT_CGROUPS = cgroups_here()
#: Programs run as an unprivileged uid here (a root host), not as the host's own.
UNPRIVILEGED_RUNS = unprivileged_runs_here()


def gap(
    request: pytest.FixtureRequest,
    isolation: str,
    what: str,
    *,
    closed_by_landlock: int | None = None,
    closed_by_cgroups: str | None = None,
    closed_by_uid: bool = False,
    levels: tuple[str, ...] = ("process",),
    base: str = NO_PID_NAMESPACE,
) -> None:
    """Mark a known isolation gap: strict xfail at ``levels`` (unless this kernel's Landlock
    ABI, a feature of the runtime's cgroups, or programs running as an unprivileged uid
    (``closed_by_uid``) closes it), a plain assertion elsewhere."""
    if isolation not in levels:
        return
    if closed_by_uid:
        if UNPRIVILEGED_RUNS:
            return
        what += " (programs here run as the host's uid)"
    if closed_by_cgroups is not None:
        if closed_by_cgroups in RUNTIME_CGROUPS:
            return
        what += f" (runs here have no {closed_by_cgroups!r} cgroup: {WHY_NOT_CGROUPS})"
    if closed_by_landlock is not None and closed_by_landlock <= LANDLOCK_ABI:
        return
    if closed_by_landlock is not None:
        what += f" (Landlock ABI {LANDLOCK_ABI} < {closed_by_landlock} on this kernel)"
    request.node.add_marker(pytest.mark.xfail(strict=True, reason=f"{base}: {what}"))


def kind_of(result: RunResult) -> str | None:
    """The failure kind of ``result``, None if it succeeded."""
    return result.error.kind if result.error is not None else None


def expect(result: RunResult, kind: str, budget: str | None = None) -> None:
    """Assert that ``result`` failed with ``kind`` (and ``budget``, if given)."""
    assert result.error is not None, f"expected {kind}, got value {result.value!r}"
    assert result.error.kind == kind, f"expected {kind}, got {result.error}"
    if budget is not None:
        assert result.error.budget == budget


async def echo(args: Any) -> Any:
    """A binding that returns its arguments."""
    return args


_MARK_PREFIX = "dshadv"
_PR_SET_NAME = 15
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

#: Code a program can use to reach its template, the host and its sibling children; the
#: pids come in as the inputs ``template_pid`` and ``host_pid`` (see ``pids``), since under
#: a PID namespace the child cannot find them itself. Where /proc hides them (each run its own
#: uid), the program asks the host for them: ``KNOWN = await tools.others()`` (the binding
#: ``others(rt)`` gives), so an attack is still tried on every pid it could have guessed.
PROC_HELPERS = textwrap.dedent(
    """\
    import os
    TEMPLATE = template_pid
    HOST = host_pid
    KNOWN = []
    def children_of(pid):
        found = []
        for tid in os.listdir(f'/proc/{pid}/task'):
            with open(f'/proc/{pid}/task/{tid}/children') as f:
                found += [int(p) for p in f.read().split()]
        return found
    def siblings():
        try:
            seen = [p for p in children_of(TEMPLATE) if p != os.getpid()]
        except OSError:
            seen = []
        return seen or [p for p in KNOWN if p != os.getpid()]
    def wait_for_siblings(seconds=3.0):
        # Until the template has another child (the next spare) where this run can see it;
        # [] at once where it cannot (a PID namespace of its own shows no template at all).
        import time
        if not os.path.exists(f'/proc/{TEMPLATE}') and not KNOWN:
            return []
        end = time.monotonic() + seconds
        while not (found := siblings()) and time.monotonic() < end:
            time.sleep(0.01)
        return found
    """
)


def others(rt: SubprocessRuntime) -> Binding:
    """A binding giving the pids of the runtime's other children (spares and runs), once there
    is one besides the caller (waiting up to 2 s): what a program could guess, given."""

    async def known(args: Any) -> list[int]:
        with anyio.move_on_after(2):
            while True:
                for spare in rt._spares:
                    spare.stale()  # reads the template's records: its pid, once forked
                found = [s.pid for s in rt._spares if s.pid is not None]
                found += [r.pid for r in rt._runs if r.pid is not None]
                if len(found) > 1 or (found and not rt._runs):
                    break
                await anyio.sleep(0.01)
        return sorted(set(found))

    return known


def pids(rt: SubprocessRuntime) -> dict[str, int]:
    """The inputs PROC_HELPERS needs: this (host) process and the runtime's template."""
    template = rt._template
    assert template is not None and template.pid is not None, "start the runtime first"
    return {"host_pid": os.getpid(), "template_pid": template.pid}


def bridge_helpers() -> str:
    """Code that finds the child's bridge fds (by access mode) and writes frames to ctl_out
    (waiting while the pipe is full: the child's bridge fds are non-blocking)."""
    return textwrap.dedent(
        """\
        import os, fcntl, struct, json
        def _bridge_fd(mode):
            for name in os.listdir('/proc/self/fd'):
                fd = int(name)
                try:
                    flags = fcntl.fcntl(fd, fcntl.F_GETFL)
                except OSError:
                    continue
                if fd > 2 and flags & os.O_ACCMODE == mode and os.readlink(f'/proc/self/fd/{fd}').startswith('pipe:'):
                    return fd
        CTL_OUT = _bridge_fd(os.O_WRONLY)
        CTL_IN = _bridge_fd(os.O_RDONLY)
        def frame(body):
            if not isinstance(body, bytes):
                body = json.dumps(body).encode()
            return struct.pack('!I', len(body)) + body
        def send(body):
            send_raw(frame(body))
        def send_raw(data):
            import select
            while data:
                try:
                    data = data[os.write(CTL_OUT, data):]
                except BlockingIOError:  # the bridge's fds are non-blocking
                    select.select([], [CTL_OUT], [])
        """
    )


def new_mark() -> str:
    """A unique process name (at most 15 bytes, the kernel's limit for ``comm``)."""
    return _MARK_PREFIX + secrets.token_hex(4)


def prelude(mark: str) -> str:
    """One line that names the child (and so every process it forks) ``mark``."""
    return f"import ctypes as _c; _c.CDLL(None).prctl({_PR_SET_NAME}, b'{mark}', 0, 0, 0); del _c\n"


def _is_live(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            state = f.read().rsplit(b")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in (b"Z", b"X")


def live_marked(mark: str) -> list[int]:
    """Pids of live (not zombie) processes whose name or command line carries ``mark``."""
    found = []
    needle = mark.encode()
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        pid = int(name)
        try:
            with open(f"/proc/{pid}/comm", "rb") as f:
                comm = f.read()
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmdline = f.read()
        except OSError:
            continue
        if (needle in comm or needle in cmdline) and _is_live(pid):
            found.append(pid)
    return found


def kill_marked(mark: str, rounds: int = 50) -> None:
    """Safety net: SIGKILL (by pid) every process carrying ``mark`` until none is left."""
    for _ in range(rounds):
        pids = live_marked(mark)
        if not pids:
            return
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        time.sleep(0.02)


async def _probe(args: Any) -> Any:
    return args["n"]


async def probe_is_clean(rt: SubprocessRuntime) -> None:
    """The next run on ``rt`` returns a clean result, and the template holds only spares."""
    with anyio.fail_after(15):
        result = await rt.run(
            RunRequest(
                program="print('probe')\nreturn (await tools.probe(n=41)) + 1",
                bindings={"tools.probe": _probe},
                limits=Limits(compute_ms=2_000, max_wall_ms=5_000),
            )
        )
    assert result.error is None, f"the run after the hostile one failed: {result.error}"
    assert (result.value, result.logs) == (42, ["probe"])
    assert result.stats is not None and result.stats.dropped_frames == 0
    template = rt._template
    assert template is not None and template.pid is not None
    # Each spare child is one direct child of the template (with a namespace, its inner
    # process sits below it); a stray left by a run would be reparented here too.
    spares: int = getattr(rt, "_prefork", 1)
    end = time.monotonic() + 3
    while True:
        tree = live_children(template.pid)
        if len(tree) <= spares or time.monotonic() > end:
            break
        await anyio.sleep(0.02)
    assert len(tree) <= spares, f"the template still has {len(tree)} live children"


async def run_hostile(
    rt: SubprocessRuntime,
    program: str,
    *,
    limits: Limits = HOSTILE,
    bindings: Mapping[str, Binding] | None = None,
    inputs: Mapping[str, Any] | None = None,
    timeout: float | None = None,
    probe: bool = True,
    call_style: str = "async",
) -> RunResult:
    """Run ``program`` (named with a fresh mark), check it left nothing, then probe the host.

    The run must resolve (no raise, no hang past its wall budget plus slack); when it has
    returned, no process it started may run again (each is gone, a zombie, exiting or
    killed); the next run must be clean.
    """
    mark = new_mark()
    request = RunRequest(
        program=prelude(mark) + program,
        bindings=dict(bindings or {}),
        inputs=dict(inputs or {}),
        limits=limits,
        call_style=call_style,  # type: ignore[arg-type]
    )
    try:
        with anyio.fail_after(timeout if timeout is not None else limits.max_wall_ms / 1000 + 10):
            result = await rt.run(request)
        left = [pid for pid in live_marked(mark) if can_still_run(pid)]
        assert left == [], f"processes of the run can still run after it returned: {left}"
    finally:
        kill_marked(mark)
    if probe:
        await probe_is_clean(rt)
    return result


_HOST_SCRIPT = textwrap.dedent(
    """\
    import json, os, sys
    sys.path.insert(0, sys.argv[1])
    import anyio
    from host.sandbox import SubprocessRuntime
    from runtime import Limits, RunRequest

    async def main():
        program = sys.stdin.read()
        limits = Limits(compute_ms=1_000, max_wall_ms=5_000)
        async with SubprocessRuntime(isolation=sys.argv[2]) as rt:
            warm = await rt.run(RunRequest(program="return 1", limits=limits))
            template = rt._template.pid
            print(json.dumps({"template": template, "warm": warm.value}), flush=True)
            inputs = {"host_pid": os.getpid(), "template_pid": template}
            first = await rt.run(RunRequest(program=program, limits=limits, inputs=inputs))
            print(json.dumps({"first": first.to_json()}), flush=True)
            probe = await rt.run(RunRequest(program="return 42", limits=limits))
            print(json.dumps({"probe": probe.to_json()}), flush=True)

    anyio.run(main)
    """
)


class SeparateHost:
    """What a host started in its own process reported, and how it ended."""

    def __init__(self, returncode: int | None, lines: list[dict[str, Any]], stopped: bool) -> None:
        self.returncode = returncode
        self.lines = lines
        self.stopped = stopped

    def get(self, key: str) -> Any:
        for line in self.lines:
            if key in line:
                return line[key]
        return None

    @property
    def survived(self) -> bool:
        """It ran the hostile program, then a clean probe, and exited 0 on its own."""
        probe = self.get("probe")
        return (
            self.returncode == 0
            and not self.stopped
            and probe is not None
            and probe.get("value") == 42
            and "error" not in probe
        )


def run_in_separate_host(
    program: str,
    isolation: str,
    *,
    env: Mapping[str, str] | None = None,
    timeout: float = 20.0,
) -> SeparateHost:
    """Run ``program`` on a SubprocessRuntime inside a fresh host process (for cases that
    would hurt the pytest process itself); the host is resumed and killed if it hangs."""
    mark = new_mark()
    environ = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), **(env or {})}
    proc = subprocess.Popen(
        [sys.executable, "-c", _HOST_SCRIPT, REPO, isolation],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=environ,
    )
    stopped = False
    out = b""
    try:
        try:
            out, _ = proc.communicate((prelude(mark) + program).encode(), timeout=timeout)
        except subprocess.TimeoutExpired:
            stopped = True
            try:
                proc.send_signal(signal.SIGCONT)
                out, _ = proc.communicate(timeout=timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                out, _ = proc.communicate()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    lines = []
    for raw in out.decode(errors="replace").splitlines():
        try:
            lines.append(json.loads(raw))
        except ValueError:
            continue
    host = SeparateHost(proc.returncode, lines, stopped)
    template = host.get("template")
    if isinstance(template, int):
        _wait_gone(template)
    kill_marked(mark)
    return host


def _wait_gone(pid: int) -> None:
    """The inner host's template exits when its socket closes; kill it if it does not."""
    end = time.monotonic() + 5
    while _is_live(pid) and time.monotonic() < end:
        time.sleep(0.02)
    if _is_live(pid):
        try:
            cmdline = psutil.Process(pid).cmdline()
        except psutil.Error:
            return
        if "runtime._template" in " ".join(cmdline):
            os.kill(pid, signal.SIGKILL)


class PeakRss:
    """The host's peak resident memory while the block runs, sampled by a thread every 5 ms."""

    def __init__(self) -> None:
        self.base: int = psutil.Process().memory_info().rss
        self.peak: int = self.base
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        me = psutil.Process()
        while not self._done.wait(0.005):
            self.peak = max(self.peak, me.memory_info().rss)

    @property
    def grown(self) -> int:
        """Bytes the peak reached above the start."""
        return self.peak - self.base

    def __enter__(self) -> PeakRss:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._done.set()
        self._thread.join()
        self.peak = max(self.peak, psutil.Process().memory_info().rss)


class Stalls:
    """The longest the host's event loop went without running a 10 ms ticker."""

    def __init__(self) -> None:
        self.longest = 0.0


@asynccontextmanager
async def loop_stalls() -> AsyncIterator[Stalls]:
    """Measure how long the event loop stalls while the block runs."""
    stalls = Stalls()

    async def ticker() -> None:
        last = time.monotonic()
        while True:
            await anyio.sleep(0.01)
            now = time.monotonic()
            stalls.longest = max(stalls.longest, now - last - 0.01)
            last = now

    async with anyio.create_task_group() as tg:
        tg.start_soon(ticker)
        try:
            yield stalls
        finally:
            tg.cancel_scope.cancel()
