"""One run in one fresh child: start, watchers, settle; what is left is released later.

A run is a chain of small steps (``_spawn`` -> the watchers -> ``_settle`` -> ``_conclude``).
Its outcome is claimed once through its ``Guard`` (shared with the runtime's watchdog thread,
which enforces the budgets whatever the event loop does). ``execute`` returns once the
outcome is known and no process of the run can execute again; ``release`` then waits for
them to exit and frees what the run held (fds, directory, cgroup), off the caller's path.
"""

from __future__ import annotations

import logging
import os
import select
import signal
import threading
import time
from typing import Any

import anyio
import anyio.abc
import anyio.to_thread
import msgspec

from host.sandbox._calls import CallServer, replay_fields
from host.sandbox._cgroup import MEMORY_HEADROOM, RunCgroup
from host.sandbox._cpu import move_off_this_cpu
from host.sandbox._fdio import FrameWriter, close_fd
from host.sandbox._intake import Intake, decoder
from host.sandbox._logs import LogIntake
from host.sandbox._options import RunOptions, SessionState, keeps_state
from host.sandbox._slot import ChildSlot
from host.sandbox._watchdog import Guard, Watchdog
from host.sandbox._where import program_location, read_dump
from host.telemetry import record_child_wait
from runtime import RunError, RunRequest, RunResult, RunStats
from runtime.lowlevel import (
    CallLedger,
    FrameBuffer,
    Ready,
    Start,
    State,
    encode_frame,
    kill_tree,
    tree_cpu_ns,
)

__all__ = ("Run",)

_log = logging.getLogger("host.sandbox")

#: How long the kill at a budget waits for the program to write its stacks and die (the
#: budget's overshoot grows by at most this; past it, the failure says no place).
LOCATE_WAIT_MS = 2
#: Processes of a killed run whose exit is watched through pidfds (the rest: polled).
_WATCHED_MAX = 64
_SIGNAL_NAMES = {
    9: "SIGKILL",
    11: "SIGSEGV",
    6: "SIGABRT",
    24: "SIGXCPU",
    25: "SIGXFSZ",
    7: "SIGBUS",
    15: "SIGTERM",
    13: "SIGPIPE",
}


#: How a child that failed its own set-up leaves, and the log line that says why.
_SETUP_FAILED = 70
_SETUP_LINE = "dsh-code child set-up failed: "


def _died_message(status: int | None) -> str:
    if status is None:
        return "the child died and its exit status is unknown"
    if status < 0:
        name = _SIGNAL_NAMES.get(-status, f"signal {-status}")
        return f"the child was killed by {name} before reporting a result"
    return f"the child exited with status {status} before reporting a result"


def _pidfds(pids: list[int]) -> list[int]:
    opened = []
    for pid in pids:
        try:
            opened.append(os.pidfd_open(pid))
        except OSError:
            pass  # gone already
    return opened


class Run(Intake):
    """The state of one run, from fork to settle."""

    def __init__(
        self,
        request: RunRequest,
        code: bytes,
        slot: ChildSlot,
        options: RunOptions,
        watchdog: Watchdog,
        session: SessionState | None = None,
        ledger: CallLedger | None = None,
    ) -> None:
        self.request = request
        self.ledger = ledger or CallLedger(request)
        self.ledger.stop = self._settle
        self.run_id = self.ledger.run_id
        self.session = session
        self.limits = limits = request.limits
        self.code = code
        self.slot = slot
        self.options = options
        self.watchdog = watchdog
        self.guard = Guard(
            wall_s=limits.max_wall_ms / 1000,
            compute_ms=limits.compute_ms,
            measure=self._measure,
            kill=self._kill,
            locate=self._locate,
        )
        self.logs = LogIntake(limits.max_output_bytes, options.max_log_lines, self.ledger.on_log)
        self._writer = FrameWriter(slot.fds["to_child"])
        self.calls = CallServer(
            request.bindings,
            max_workers=limits.max_parallel_sub_calls,
            max_bytes=options.max_call_bytes,
            max_calls=options.max_calls_in_flight,
            send_nowait=self._writer.send_nowait,
        )
        self.pid: int | None = None
        self.exit_status: int | None = None
        self.value: Any = msgspec.UNSET
        self.value_is_repr = False
        self.scope = anyio.CancelScope()
        self.closing_reason: str | None = None
        max_frame = options.max_frame_bytes
        if session is not None:  # the State frame: the blob as base64, and its names
            max_frame = max(max_frame, session.max_bytes // 3 * 4 + (1 << 20))
        self._frames = FrameBuffer(max_frame)
        self.state: State | None = None
        self._compiled_by_child = False
        self._cpu_base = 0
        self._pidfd: int | None = None
        self._kill_lock = threading.Lock()
        self._locating = threading.Lock()
        self._killed = False
        self._watched: list[int] = []  # pidfds of the killed run's processes
        self._exited = anyio.Event()
        self._settled_at: float | None = None
        self._tg: anyio.abc.TaskGroup | None = None
        self._resume = anyio.Event()  # set when the bridge may be read again

    # ---- the whole life ------------------------------------------------------------------

    async def execute(self) -> RunResult:
        """Run until the outcome is known and no process of the run can execute again;
        returns the result whatever happened (cancellation included)."""
        self.watchdog.watch(self.guard)
        try:
            with self.scope:
                with anyio.move_on_after(self.limits.max_wall_ms / 1000) as wall:
                    await self._spawn()
                    if self.guard.outcome is None:
                        await self._watch()
                if wall.cancelled_caught:
                    self.guard.expire("wall")
        except anyio.get_cancelled_exc_class():
            pass  # the caller cancelled: we still settle and report `aborted`
        finally:
            self.watchdog.forget(self.guard)
            with anyio.CancelScope(shield=True):
                await self._conclude()
        return self.ledger.finish(self._result())

    async def _watch(self) -> None:
        async with anyio.create_task_group() as tg:
            self._tg = tg
            tg.start_soon(self._read_ctl)
            tg.start_soon(self._read_logs)
            tg.start_soon(self._watch_exit)
            if self.request.on_progress is not None:
                tg.start_soon(self._report_progress)
            if self.request.abort is not None:
                tg.start_soon(self._watch_abort)

    def _stats(self) -> RunStats:
        end = self._settled_at or time.monotonic()
        return RunStats(
            isolation=self.slot.template.isolation,
            compute_ms=round(self.guard.cpu_ns / 1e6, 3),
            wall_ms=round((end - self.guard.started) * 1000, 3),
            calls=self.calls.calls,
            dropped_frames=self.calls.dropped + self._frames.oversized,
        )

    def _result(self) -> RunResult:
        outcome = self.guard.outcome
        if outcome is None:
            reason = self.closing_reason or "the caller cancelled the run"
            outcome = RunError(kind="aborted", message=reason)
        error = outcome if isinstance(outcome, RunError) else None
        if error is not None and error.kind == "died":
            error = self._classify_death(error)
        if error is not None and error.kind == "budget":
            error = self._located(error)
        value = self.value if error is None else msgspec.UNSET
        stats = self._stats()
        if (
            error is not None
            and error.budget == "compute"
            and stats.compute_ms < self.limits.compute_ms
        ):
            # a CPU timer fired at the budget, but the cgroup's count lags it by up to a
            # scheduler tick, and the process it would have read is gone
            stats = msgspec.structs.replace(stats, compute_ms=float(self.limits.compute_ms))
        dropped: dict[str, str] = {}
        if self.state is not None and (error is None or keeps_state(self.session, error)):
            stats = msgspec.structs.replace(stats, state_bytes=len(self.state.blob))
            dropped = dict(self.state.dropped)
        return RunResult(
            logs=self.logs.lines,
            value=value,
            error=error,
            stats=stats,
            state_dropped=dropped,
            value_is_repr=self.value_is_repr and error is None,
        )

    def _locate(self) -> None:
        """At a budget, before the kill: SIGXCPU to the run's process group, whose program
        writes its stacks (faulthandler, at C level) and dies of it; wait a moment for that
        (unless its own CPU timer sent it already: it is writing them)."""
        fd, pidfd = self.slot.fds.get("where"), self._pidfd
        with self._locating:  # a kill from the event loop meanwhile waits for this
            if self.pid is None or fd is None or pidfd is None or self._killed:
                return
            dumping = select.poll()
            dumping.register(fd, select.POLLIN)
            if not dumping.poll(0):
                try:
                    os.killpg(self.pid, signal.SIGXCPU)
                except OSError:
                    return
            exited = select.poll()  # the child's exit: the program's, so its stacks are written
            exited.register(pidfd, select.POLLIN)
            exited.poll(LOCATE_WAIT_MS)

    def _located(self, error: RunError) -> RunError:
        """A budget failure with where the program was, when its stacks were written."""
        fd = self.slot.fds.get("where")
        found = program_location(read_dump(fd), self.request.program) if fd is not None else None
        if found is None:
            return error
        text, lineno = found
        message = f"{error.message}; it was stopped here (most recent call last):\n{text}"
        return msgspec.structs.replace(error, message=message, lineno=lineno)

    def _classify_death(self, error: RunError) -> RunError:
        status = self.exit_status
        cgroup = self.slot.cgroup
        if cgroup is not None and cgroup.oom_kills() > 0:
            return RunError(
                kind="memory",
                message=f"the run passed the heap cap of {self.limits.max_heap_mb} MiB "
                f"(max_heap_mb; with {MEMORY_HEADROOM >> 20} MiB of headroom, for all its "
                "processes, shared memory and files in its working directory together): the "
                "kernel killed it",
            )
        if status == -24:  # SIGXCPU: the child's own CPU timer, at its budget
            return RunError(
                kind="budget",
                budget="compute",
                message=f"the run passed its compute budget of {self.limits.compute_ms} ms",
            )
        message = error.message or _died_message(status)
        if status == _SETUP_FAILED:
            reason = next((x for x in self.logs.lines if x.startswith(_SETUP_LINE)), None)
            if reason is not None:  # the child said why before it left (bounded: a log line)
                message = f"the child could not set itself up: {reason[len(_SETUP_LINE) :]}"
        return msgspec.structs.replace(error, exit_status=status, message=message)

    def _settle(self, outcome: RunResult | RunError) -> None:
        """Claim the outcome (unless the watchdog did first), kill, stop every watcher."""
        if self._settled_at is None:
            self._settled_at = time.monotonic()
        if self.pid is not None and not self._killed:
            self.guard.measure()  # a last look before it is gone
        self.guard.claim(outcome)
        self._kill()
        self.scope.cancel()

    def abort(self, reason: str) -> None:
        """Settle as ``aborted`` from outside (the runtime is closing)."""
        self.closing_reason = reason
        self._settle(RunError(kind="aborted", message=reason))

    # ---- start ---------------------------------------------------------------------------

    async def _spawn(self) -> None:
        limits = self.limits
        start = Start(
            code=self.code,
            source=self.request.program,
            policy=self.request.policy,
            call_style=self.request.call_style,
            inputs=dict(self.request.inputs),
            bindings=sorted(self.request.bindings),
            max_output_bytes=limits.max_output_bytes,
            heap_bytes=limits.max_heap_mb * 1024 * 1024,
            compute_ns=limits.compute_ms * 1_000_000,
            state=self.session.blob if self.session is not None else b"",
            keep_state=self.session is not None,
            max_state_bytes=self.session.max_bytes if self.session is not None else 0,
            state_on_failure=self.session is not None and self.session.keep_failed,
            **replay_fields(self.ledger),
        )
        cgroup = self.slot.cgroup
        if cgroup is not None and not cgroup.caps_memory_at(start.heap_bytes):
            try:  # not as the slot was made ahead of time: the writes go to a thread
                await anyio.to_thread.run_sync(cgroup.limit_memory, start.heap_bytes)
            except OSError as exc:
                _log.warning("dsh-code: cannot cap a run's memory cgroup: %s", exc)
        waited_from = time.monotonic()
        pid = await self.slot.wait_pid()
        if pid is None:
            self._settle(
                RunError(kind="died", message="the template process died before the child started")
            )
            return
        try:
            self._pidfd = os.pidfd_open(pid)
        except OSError:  # already gone (reaped): the exit watcher falls back to the template
            self._pidfd = None
        self.pid = pid
        if not await self._wait_ready():
            self._settle(RunError(kind="died", message=""))  # the message: its exit status
            return
        record_child_wait(time.monotonic() - waited_from, spare=self.slot.spare)
        # The child's set-up (a spare taken early may still be at it) is not the program's
        # CPU: billing starts here, before the program can run.
        self._cpu_base = self._tree_cpu_ns()
        self._before_start(start)
        self.watchdog.billing(self.guard)  # the backstop of the template's watch
        cgroup = self.slot.cgroup
        self.slot.template.watch(
            pid,
            self.guard.deadline,
            self.guard.budget_ns,
            cgroup.watch_fds() if cgroup else [],
            LOCATE_WAIT_MS if "where" in self.slot.fds else 0,
        )
        await self._send(encode_frame(start))

    def _before_start(self, start: Start) -> None:
        """The last step before the program goes out (a child of another engine sets limits)."""

    async def _wait_ready(self) -> bool:
        """Until the child says it is set up (a spare usually has: its frame is waiting);
        False if it died or said anything else first."""
        fd = self.slot.fds["from_child"]
        while True:
            try:
                data = os.read(fd, 4096)
            except BlockingIOError:
                await anyio.wait_readable(fd)
                continue
            if not data:
                return False
            bodies = self._frames.feed(data)
            if bodies:
                try:
                    first = decoder.decode(bodies[0])
                except (msgspec.DecodeError, RecursionError, MemoryError):
                    return False
                return isinstance(first, Ready) and len(bodies) == 1

    async def _send(self, frame: bytes) -> None:
        try:
            await self._writer.send(frame)
        except OSError:
            pass  # the child is gone; _watch_exit settles the run

    async def _wait_exited(self) -> None:
        """Until the child has exited (a pidfd turns readable; no need to wait for the reap)."""
        if self._pidfd is not None:
            await anyio.wait_readable(self._pidfd)
        else:
            self.exit_status = await self.slot.wait_exit()
        self._exited.set()

    async def _watch_exit(self) -> None:
        await self._wait_exited()
        if self.guard.outcome is None:
            self._drain_ctl()
        if self.guard.outcome is None:
            self.slot.read_records()  # the template writes why it killed before it kills
            if self.slot.budget is not None:
                self.guard.expire(self.slot.budget)
        if self.guard.outcome is None:
            # It died on its own: its exit status comes from the template, which reaps it.
            with anyio.move_on_after(self.options.settle_timeout):
                self.exit_status = await self.slot.wait_exit()
            self._settle(RunError(kind="died", message=""))
        else:
            self._settle(self.guard.outcome)  # the watchdog's: stop the other watchers

    async def _report_progress(self) -> None:
        on_progress = self.request.on_progress
        assert on_progress is not None
        while True:
            await anyio.sleep(0.1)
            try:
                on_progress(self._stats())
            except Exception:
                _log.exception("dsh-code: an on_progress callback raised (the run goes on)")

    async def _watch_abort(self) -> None:
        abort = self.request.abort
        assert abort is not None
        await abort.wait()
        self._settle(RunError(kind="aborted", message="the run was aborted by the caller"))

    # ---- the end ---------------------------------------------------------------------------

    def _tree_cpu_ns(self) -> int:
        """Busy CPU of the run's processes so far: the kernel's count in the run's cgroup
        (dead processes included, but only as fresh as the last scheduler tick), or the
        processes' own clocks (exact) where those say more."""
        cgroup = self.slot.cgroup
        counted = cgroup.cpu_ns() if cgroup is not None else None
        if counted is None:
            return tree_cpu_ns(self.pid) if self.pid is not None else 0
        return max(counted, cgroup.live_cpu_ns() if cgroup is not None else 0)

    def _measure(self) -> int:
        return self._tree_cpu_ns() - self._cpu_base

    def _kill(self) -> None:
        """SIGKILL every process of the run, once (any thread). With a cgroup that is one
        write: every process of the run is in it, however fast it forks; without, the tree."""
        with self._locating:  # the watchdog asking the program where it is: let it finish
            pass
        with self._kill_lock:
            if self._killed or self.pid is None:
                return
            self._killed = True
            cgroup = self.slot.cgroup
            if cgroup is not None:
                cgroup.kill()
                # Listed after the kill, so the list is complete: a killed process cannot fork.
                pids = cgroup.procs()
                self._watched = _pidfds(pids[:_WATCHED_MAX])
            elif not self._exited.is_set():
                # The child lingers after reporting, so every process the program started is
                # still in its tree: kill them all at once (their pidfds say when they are gone).
                self._watched = kill_tree(self.pid, self._pidfd, watch=True)
                pids = [self.pid]
            else:
                pids = []
            if cgroup is None and self.slot.own_uid and self.slot.uid is not None:
                # what left the tree (a setsid()) is still of the run's uid
                self.slot.template.kill_uid(self.slot.uid)
        move_off_this_cpu(pids)

    async def _conclude(self) -> None:
        """Kill (if no watcher did), and keep the logs written before it."""
        if self.pid is not None and not self._killed:
            self.guard.measure()  # the caller cancelled, or the runtime is closing
        self._kill()
        self.calls.close()
        if self.slot.cgroup is None and self.pid is not None:
            # Nothing makes the kill atomic: wait until every process is gone (bounded).
            await self._wait_gone()
        outcome = self.guard.outcome
        if isinstance(outcome, RunError) and outcome.kind == "died" and self.exit_status is None:
            with anyio.move_on_after(self.options.settle_timeout):  # the template reaps it
                self.exit_status = await self.slot.wait_exit()
        self._drain_logs()

    async def _wait_gone(self) -> None:
        with anyio.move_on_after(self.options.settle_timeout):
            if self.pid is not None and not self._exited.is_set():
                await self._wait_exited()
            for fd in self._watched:  # "gone" means exited, not merely signalled
                await anyio.wait_readable(fd)

    async def release(self) -> None:
        """After ``execute``: wait until every process of the run has exited, then free what
        it held (bounded by the settle timeout; the template sweeps what is left)."""
        try:
            await self._wait_gone()
            cgroup = self.slot.cgroup
            if self.pid is not None and cgroup is not None:
                await self._wait_cgroup_empty(cgroup)
        finally:  # also when the loop cancels this on its way out: the waits only, not the rest
            for fd in self._watched:
                close_fd(fd)
            self._watched = []
            if self._pidfd is not None:
                close_fd(self._pidfd)
                self._pidfd = None
            self.slot.close()  # its directory and cgroup: the runtime frees them off the loop

    async def _wait_cgroup_empty(self, cgroup: RunCgroup) -> None:
        """Until no process of the run is alive (a killed fork bomb takes a while to exit)."""
        # Usually the pidfds of _kill saw every process exit already. Otherwise poll (one
        # pread) at most every millisecond. Not an inotify watch on cgroup.events: the
        # kernel sends at most one of its events per 10 ms.
        delay = 0.0002
        with anyio.move_on_after(self.options.settle_timeout):
            while cgroup.populated():
                await anyio.sleep(delay)
                delay = min(delay * 2, 0.001)
