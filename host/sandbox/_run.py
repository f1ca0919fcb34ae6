"""One run in one fresh child: start, bridge, budgets, logs, settle, clean up.

A run is a chain of small steps (``_spawn`` -> the watchers -> ``_settle`` ->
``_cleanup``); every way out goes through ``_cleanup``, which kills what the run
started, reaps it, drains the logs, closes the fds and removes the working dir.
"""

from __future__ import annotations

import asyncio
import codecs
import logging
import math
import os
import tempfile
import time
from typing import Any

import anyio
import msgspec

from host.sandbox._callqueue import CallQueue
from host.sandbox._cgroup import RunCgroup
from host.sandbox._cpu import move_off_this_cpu
from host.sandbox._fdio import FrameWriter, close_fd, read_some
from host.sandbox._slot import ChildSlot
from runtime._contract import RunError, RunRequest, RunResult, RunStats
from runtime._json import json_problem
from runtime._procs import kill_tree, tree_cpu_ns
from runtime._wire import (
    Call,
    Compiled,
    Done,
    Failed,
    FrameBuffer,
    Ready,
    Reply,
    ReplyError,
    Start,
    encode_frame,
)

__all__ = ("Run", "RunOptions", "default_workdir_root")

_log = logging.getLogger("host.sandbox")

_decoder = msgspec.json.Decoder(Ready | Call | Compiled | Done | Failed)
_value_decoder = msgspec.json.Decoder()
_CPUS = os.cpu_count() or 1
#: The shortest sleep between two looks at a run's compute.
_POLL_MIN_S = 0.00025
#: The failure kinds a child may report (the others are the host's to decide).
_CHILD_FAILURES = ("exception", "invalid_completion", "output_limit", "memory")
#: Processes of a killed run whose exit is watched through pidfds (the rest: polled).
_WATCHED_MAX = 64
#: Binding calls a run may have waiting or running at once; past it, Call frames are dropped.
_MAX_IN_FLIGHT = 10_000
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


def default_workdir_root() -> str:
    """/dev/shm when writable (tmpfs: a run's mkdir + rmdir cost ~30 µs, not ~2 ms), else TMPDIR."""
    shm = "/dev/shm"
    if os.path.isdir(shm) and os.access(shm, os.W_OK | os.X_OK):
        return shm
    return tempfile.gettempdir()


class RunOptions(msgspec.Struct, frozen=True, kw_only=True):
    """Backend settings that are not per-request limits."""

    workdir_root: str
    max_frame_bytes: int = 64 * 1024 * 1024 + 4096
    max_file_bytes: int = 256 * 1024 * 1024
    max_open_files: int = 256
    settle_timeout: float = 5.0


def _pidfds_in(cgroup: RunCgroup, pids: list[int]) -> list[int]:
    """pidfds of those of ``pids`` that are still processes of ``cgroup``."""
    opened: dict[int, int] = {}
    for pid in pids:
        try:
            opened[pid] = os.pidfd_open(pid)
        except OSError:
            pass  # gone already
    if not opened:
        return []
    # A pid reaped and reused between the listing and pidfd_open is not in the cgroup (no
    # process joins a killed run's cgroup): look again, so no stranger's exit is awaited.
    ours = set(cgroup.procs())
    for pid in [p for p in opened if p not in ours]:
        os.close(opened.pop(pid))
    return list(opened.values())


def _asyncio_loop() -> asyncio.AbstractEventLoop | None:
    """The running asyncio loop, if that is the backend and it takes fd readers."""
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:  # trio
        return None
    return loop if isinstance(loop, asyncio.SelectorEventLoop) else None


def _died_message(status: int | None) -> str:
    if status is None:
        return "the child died and its exit status is unknown"
    if status < 0:
        name = _SIGNAL_NAMES.get(-status, f"signal {-status}")
        return f"the child was killed by {name} before reporting a result"
    return f"the child exited with status {status} before reporting a result"


class Run:
    """The state of one run, from fork to settle."""

    def __init__(
        self,
        request: RunRequest,
        code: bytes,
        slot: ChildSlot,
        options: RunOptions,
    ) -> None:
        self.request = request
        self.limits = request.limits
        self.code = code
        self.slot = slot
        self.options = options
        self.logs: list[str] = []
        self.log_bytes = 0
        self.calls = 0
        self.dropped = 0
        self.pid: int | None = None
        self.exit_status: int | None = None
        self.outcome: RunResult | RunError | None = None
        self.value: Any = msgspec.UNSET
        self.scope = anyio.CancelScope()
        self.closing_reason: str | None = None
        self._frames = FrameBuffer(options.max_frame_bytes)
        self._seen_ids: set[int] = set()
        self._in_flight = 0
        self._compiled_by_child = False
        self._log_decoder = codecs.getincrementaldecoder("utf-8")("replace")
        self._partial = ""
        self._writer = FrameWriter(slot.fds["to_child"])
        # Calls are served by up to max_parallel_sub_calls worker tasks, started as needed
        # and fed in arrival order: a task per call costs more than the rest of the call.
        self._calls: CallQueue | None = None  # made at the first call
        self._workers = 0
        self._cpu_ns = 0
        self._cpu_base = 0
        self._pidfd: int | None = None
        self._killed = False
        self._watched: list[int] = []  # pidfds of the killed run's other processes
        self._exited = anyio.Event()
        self._started = time.monotonic()
        self._settled_at: float | None = None

    # ---- the whole life ------------------------------------------------------------------

    async def execute(self) -> RunResult:
        """Run to completion; returns the result whatever happened (cancellation included)."""
        try:
            with self.scope:
                with anyio.move_on_after(self.limits.max_wall_ms / 1000) as wall:
                    await self._spawn()
                    async with anyio.create_task_group() as tg:
                        self._tg = tg
                        tg.start_soon(self._read_ctl)
                        tg.start_soon(self._read_logs)
                        tg.start_soon(self._watch_exit)
                        tg.start_soon(self._watch_budget)
                        if self.request.abort is not None:
                            tg.start_soon(self._watch_abort)
                if wall.cancelled_caught and self.outcome is None:
                    self._settle(
                        RunError(
                            kind="budget",
                            budget="wall",
                            message=f"the run passed its wall-clock budget of {self.limits.max_wall_ms} ms",
                        )
                    )
        except anyio.get_cancelled_exc_class():
            pass  # the caller cancelled: we still settle, clean up and report `aborted`
        finally:
            with anyio.CancelScope(shield=True):
                await self._cleanup()
        if self.outcome is None:
            reason = self.closing_reason or "the caller cancelled the run"
            self.outcome = RunError(kind="aborted", message=reason)
        return self._result()

    def _stats(self) -> RunStats:
        end = self._settled_at or time.monotonic()
        return RunStats(
            isolation=self.slot.template.isolation,
            compute_ms=round(self._cpu_ns / 1e6, 3),
            wall_ms=round((end - self._started) * 1000, 3),
            calls=self.calls,
            dropped_frames=self.dropped + self._frames.oversized,
        )

    def _result(self) -> RunResult:
        stats = self._stats()
        error = self.outcome if isinstance(self.outcome, RunError) else None
        if error is not None and error.kind == "died":
            error = self._classify_death(error)
        return RunResult(logs=self.logs, value=self.value, error=error, stats=stats)

    def _classify_death(self, error: RunError) -> RunError:
        status = self.exit_status
        cgroup = self.slot.cgroup
        if cgroup is not None and cgroup.oom_kills() > 0:
            return RunError(
                kind="memory",
                message=f"the run passed its memory cap (max_heap_mb {self.limits.max_heap_mb} "
                "plus headroom, all its processes, shared memory and files in its working "
                "directory together): the kernel killed it",
            )
        if status == -24:  # SIGXCPU: the CPU rlimit backstop fired before our own poll
            return RunError(
                kind="budget",
                budget="compute",
                message=f"the run passed its compute budget of {self.limits.compute_ms} ms",
            )
        return msgspec.structs.replace(
            error,
            exit_status=status,
            message=error.message if error.message else _died_message(status),
        )

    def _settle(self, outcome: RunResult | RunError) -> None:
        """Record the first outcome and stop every watcher; later outcomes are ignored."""
        if self.outcome is not None:
            return
        self.outcome = outcome
        self._settled_at = time.monotonic()
        if self.pid is not None and not self._exited.is_set():
            # last look before it is reaped
            self._cpu_ns = max(self._cpu_ns, self._tree_cpu_ns() - self._cpu_base)
        # Kill now, not in _cleanup: the processes exit (~0.3-2 ms here, freeing their
        # memory) while the watchers unwind.
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
            inputs=dict(self.request.inputs),
            bindings=sorted(self.request.bindings),
            max_output_bytes=limits.max_output_bytes,
            heap_bytes=limits.max_heap_mb * 1024 * 1024,
            cpu_seconds=math.ceil(limits.compute_ms / 1000) + 1,
        )
        if self.slot.cgroup is not None:
            try:
                self.slot.cgroup.limit_memory(start.heap_bytes)
            except OSError as exc:
                _log.warning("dsh-code: cannot cap a run's memory cgroup: %s", exc)
        self.pid = await self.slot.wait_pid()
        if self.pid is None:
            self._settle(
                RunError(kind="died", message="the template process died before the child started")
            )
            return
        try:
            self._pidfd = os.pidfd_open(self.pid)
        except OSError:  # already gone (reaped): the exit watcher falls back to the template
            self._pidfd = None
        if not await self._wait_ready():
            self._settle(RunError(kind="died", message=""))  # the message: its exit status
            return
        # The child's set-up (a spare taken early may still be at it) is not the program's
        # CPU: billing starts here, before the program can run.
        self._cpu_base = self._tree_cpu_ns()
        await self._send(encode_frame(start))

    async def _wait_ready(self) -> bool:
        """Until the child says it is set up (a spare usually has: its frame is waiting);
        False if it died or said anything else first."""
        fd = self.slot.fds["from_child"]
        while True:
            data = await read_some(fd, 4096)
            if not data:
                return False
            bodies = self._frames.feed(data)
            if bodies:
                try:
                    first = _decoder.decode(bodies[0])
                except (msgspec.DecodeError, RecursionError, MemoryError):
                    return False
                return isinstance(first, Ready) and len(bodies) == 1

    async def _send(self, frame: bytes) -> None:
        try:
            await self._writer.send(frame)
        except OSError:
            pass  # the child is gone; _watch_exit settles the run

    # ---- watchers --------------------------------------------------------------------------

    async def _read_ctl(self) -> None:
        fd = self.slot.fds["from_child"]
        loop = _asyncio_loop()
        if loop is not None:
            await self._read_ctl_in_callback(loop, fd)
        else:
            while data := await read_some(fd, 1 << 20):
                self._handle_ctl_bytes(data)
        if self.outcome is None:
            # A child that exits closes this pipe too: give its exit a moment to show.
            with anyio.move_on_after(0.5):
                await self._exited.wait()
            message = (
                ""  # filled in from the exit status
                if self._exited.is_set()
                else "the child closed its end of the bridge before reporting a result"
            )
            self._settle(RunError(kind="died", message=message))

    async def _read_ctl_in_callback(self, loop: asyncio.AbstractEventLoop, fd: int) -> None:
        """Under asyncio: handle frames in a reader callback as they arrive, until EOF.

        Waking this task for each frame would cost, per binding call, a loop iteration and
        two epoll_ctl calls more than the call's own work on the host.
        """
        eof: asyncio.Future[None] = loop.create_future()

        def on_readable() -> None:
            try:
                data = os.read(fd, 1 << 20)
            except BlockingIOError:
                return
            except OSError:
                data = b""
            try:
                if data:
                    self._handle_ctl_bytes(data)
                    return
                if not eof.done():
                    eof.set_result(None)
            except BaseException as exc:  # our bug: raise it in the task, not in the loop
                if not eof.done():
                    eof.set_exception(exc)
            loop.remove_reader(fd)

        loop.add_reader(fd, on_readable)
        try:
            await eof
        finally:
            loop.remove_reader(fd)

    def _handle_ctl_bytes(self, data: bytes) -> None:
        for body in self._frames.feed(data):
            try:
                message = _decoder.decode(body)
            except (msgspec.DecodeError, RecursionError, MemoryError):
                self.dropped += 1
                continue
            if self.outcome is not None:
                self.dropped += 1
                continue
            if isinstance(message, Call):
                self._on_call(message)
            elif isinstance(message, Ready):
                self.dropped += 1  # said once, before the program: this one is forged
            elif isinstance(message, Compiled):
                if self.code or self._compiled_by_child:
                    self.dropped += 1  # we compiled it, or it was said already: forged
                self._compiled_by_child = True
            elif isinstance(message, Done):
                self._on_done(message)
            else:
                self._on_failed(message)

    def _on_call(self, call: Call) -> None:
        if call.id in self._seen_ids or self._in_flight >= _MAX_IN_FLIGHT:
            self.dropped += 1  # a duplicate id, or a flood no program could mean
            return
        self._seen_ids.add(call.id)
        self.calls += 1
        try:
            args = _value_decoder.decode(call.args)
        except (msgspec.DecodeError, RecursionError, MemoryError):
            self._settle(
                RunError(
                    kind="invalid_completion",
                    message=f"the arguments of binding {call.name} cannot be read as JSON "
                    "(nested too deep, or an integer of more than 4300 digits)",
                )
            )
            return
        binding = self.request.bindings.get(call.name)
        if binding is None:  # answered on the spot: a forged name costs no task
            self._writer.send_nowait(
                encode_frame(
                    ReplyError(
                        id=call.id,
                        tool=call.name,
                        message=f"no binding named {call.name!r}",
                        code="UNKNOWN_TOOL",
                    )
                )
            )
            return
        self._in_flight += 1
        if self._calls is None:
            self._calls = CallQueue()
        calls = self._calls
        if self._workers < self.limits.max_parallel_sub_calls and calls.idle_workers == 0:
            self._workers += 1
            self._tg.start_soon(self._serve_calls, calls)
        calls.put((call.id, call.name, binding, args))

    def _on_done(self, done: Done) -> None:
        if not done.has_value:
            self._settle(RunResult(logs=self.logs))
            return
        raw = bytes(done.value)
        if self.log_bytes + len(raw) > self.limits.max_output_bytes:
            self._settle(
                RunError(
                    kind="output_limit",
                    message=f"the result ({len(raw)} bytes of JSON) after {self.log_bytes} bytes "
                    f"of logs passed max_output_bytes ({self.limits.max_output_bytes})",
                )
            )
            return
        try:
            value = _value_decoder.decode(raw)
        except (msgspec.DecodeError, RecursionError, MemoryError):
            self._settle(
                RunError(
                    kind="invalid_completion",
                    message="the result cannot be read as JSON (nested too deep, or an integer "
                    "of more than 4300 digits)",
                )
            )
            return
        problem = json_problem(value)
        if problem is not None:
            self._settle(
                RunError(
                    kind="invalid_completion", message=f"the result is not lossless JSON: {problem}"
                )
            )
            return
        self.value = value
        self._settle(RunResult(logs=self.logs, value=value))

    def _on_failed(self, failed: Failed) -> None:
        # `parse` only from a child left the compiling, and only before it said it compiled
        may_parse = not self.code and not self._compiled_by_child
        allowed = (*_CHILD_FAILURES, "parse") if may_parse else _CHILD_FAILURES
        if failed.kind not in allowed:
            self.dropped += 1
            return
        size = len(failed.message) + len(failed.traceback or "")
        if self.log_bytes + size > self.limits.max_output_bytes:
            self._settle(
                RunError(
                    kind="output_limit",
                    message=f"the failure report ({size} characters) after {self.log_bytes} "
                    f"bytes of logs passed max_output_bytes ({self.limits.max_output_bytes})",
                )
            )
            return
        self._settle(
            RunError(
                kind=failed.kind,  # type: ignore[arg-type]
                message=failed.message,
                exception_type=failed.exception_type,
                traceback=failed.traceback,
                lineno=failed.lineno,
            )
        )

    async def _serve_calls(self, calls: CallQueue) -> None:
        """A worker: serves calls one at a time until the run settles."""
        while (call := await calls.get()) is not None:
            call_id, name, binding, args = call
            try:
                reply = await self._call_binding(call_id, name, binding, args)
            finally:
                self._in_flight -= 1
            if reply is not None and self.outcome is None:
                await self._send(encode_frame(reply))

    async def _call_binding(
        self, call_id: int, name: str, binding: Any, args: Any
    ) -> Reply | ReplyError | None:
        """The binding's answer as a reply; None when its value settled the run instead."""
        try:
            value = await binding(args)
        except Exception as exc:
            code = getattr(exc, "code", None)
            tool = getattr(exc, "tool", None)
            return ReplyError(
                id=call_id,
                tool=tool if isinstance(tool, str) else name,
                message=str(getattr(exc, "message", "") or exc) or type(exc).__name__,
                code=code if isinstance(code, str) else "TOOL_ERROR",
            )
        problem = json_problem(value)
        if problem is not None:
            self._settle(
                RunError(
                    kind="invalid_completion",
                    message=f"binding {name} returned a value that is not lossless JSON: {problem}",
                )
            )
            return None
        return Reply(id=call_id, value=value)

    async def _read_logs(self) -> None:
        fd = self.slot.fds["log"]
        while True:
            data = await read_some(fd)
            if not data:
                return
            self._feed_logs(data)

    def _feed_logs(self, data: bytes) -> bool:
        """Take log bytes up to the output cap; past it, the run is an ``output_limit``."""
        room = self.limits.max_output_bytes - self.log_bytes
        over = len(data) > room
        if over:
            data = data[: max(room, 0)]
        self.log_bytes += len(data)
        self._add_text(self._log_decoder.decode(data))
        if over:
            self._output_over()
        return over

    def _output_over(self) -> None:
        error = RunError(
            kind="output_limit",
            message=f"the logs passed max_output_bytes ({self.limits.max_output_bytes}); "
            "they are kept up to the cap",
        )
        if isinstance(self.outcome, RunResult):
            # The child counted only what passed through sys.stdout/stderr; raw writes to
            # fd 1 count too, and the host's count is the one that holds.
            self.value = msgspec.UNSET
            self.outcome = error
        else:
            self._settle(error)

    def _add_text(self, text: str) -> None:
        if not text:
            return
        lines = (self._partial + text).split("\n")
        self._partial = lines.pop()
        on_log = self.request.on_log
        for line in lines:
            self.logs.append(line)
            if on_log is not None:
                try:
                    on_log(line)
                except Exception:
                    pass

    def _flush_logs(self) -> None:
        self._add_text(self._log_decoder.decode(b"", final=True))
        if self._partial:
            self._add_text("\n")

    async def _wait_exited(self) -> None:
        """Until the child has exited (a pidfd turns readable; no need to wait for the reap)."""
        if self._pidfd is not None:
            await anyio.wait_readable(self._pidfd)
        else:
            self.exit_status = await self.slot.wait_exit()
        self._exited.set()

    async def _watch_exit(self) -> None:
        await self._wait_exited()
        if self.outcome is None:
            self._drain_ctl()
        if self.outcome is None:
            # It died on its own: its exit status comes from the template, which reaps it.
            with anyio.move_on_after(self.options.settle_timeout):
                self.exit_status = await self.slot.wait_exit()
            self._settle(RunError(kind="died", message=""))

    def _drain_ctl(self) -> None:
        # The child wrote its last frame before it exited: it is in the pipe already.
        fd = self.slot.fds["from_child"]
        while self.outcome is None:
            try:
                data = os.read(fd, 1 << 20)
            except (BlockingIOError, OSError):
                return
            if not data:
                return
            self._handle_ctl_bytes(data)

    async def _watch_budget(self) -> None:
        while self.pid is None:
            await anyio.sleep(0.0005)
        budget_ns = self.limits.compute_ms * 1_000_000
        on_progress = self.request.on_progress
        reported = 0.0
        while True:
            self._cpu_ns = self._tree_cpu_ns() - self._cpu_base
            if on_progress is not None and time.monotonic() - reported >= 0.1:
                reported = time.monotonic()
                try:
                    on_progress(self._stats())
                except Exception:
                    pass  # an observer's bug must not break the run
            remaining = budget_ns - self._cpu_ns
            if remaining <= 0:
                self._settle(
                    RunError(
                        kind="budget",
                        budget="compute",
                        message=f"the run passed its compute budget of {self.limits.compute_ms} ms",
                    )
                )
                return
            # The tree cannot burn faster than every CPU at once: sleep half the time it would
            # take to run out at that rate (at most 50 ms, at least _POLL_MIN_S, so a crossing
            # is seen within about that; the floor only ever applies in the last millisecond).
            await anyio.sleep(min(max(remaining / _CPUS / 2e9, _POLL_MIN_S), 0.05))

    async def _watch_abort(self) -> None:
        abort = self.request.abort
        assert abort is not None
        await abort.wait()
        self._settle(RunError(kind="aborted", message="the run was aborted by the caller"))

    # ---- the end ---------------------------------------------------------------------------

    def _tree_cpu_ns(self) -> int:
        """Busy CPU of the run's processes so far (the kernel's count in its cgroup, else
        a walk of its process tree)."""
        cgroup = self.slot.cgroup
        counted = cgroup.cpu_ns() if cgroup is not None else None
        if counted is not None:
            return counted
        return tree_cpu_ns(self.pid) if self.pid is not None else 0

    def _kill(self) -> None:
        """SIGKILL every process of the run, once. With a cgroup that is one write (every
        process of the run is in it, however fast it forks, and the child may have left
        already); without, the child's tree."""
        if self._killed or self.pid is None:
            return
        self._killed = True
        cgroup = self.slot.cgroup
        if cgroup is not None:
            cgroup.kill()
            # Listed after the kill, so the list is complete: a killed process cannot fork.
            # Their pidfds say when each has exited; no polling lag after the last one.
            pids = cgroup.procs()
            self._watched = _pidfds_in(cgroup, [p for p in pids[:_WATCHED_MAX] if p != self.pid])
        elif not self._exited.is_set():
            # The child lingers after reporting, so every process the program started is
            # still in its tree: kill them all at once (their pidfds say when they are gone).
            self._watched, pids = kill_tree(self.pid, self._pidfd, watch=True), [self.pid]
        else:
            pids = []
        move_off_this_cpu(pids)

    async def _cleanup(self) -> None:
        if self._calls is not None:
            self._calls.close()
        cgroup = self.slot.cgroup
        if (
            not self._killed
            and self.pid is not None
            and (not self._exited.is_set() or cgroup is not None)
        ):
            # a last look before the kill (a cgroup counts its dead too; a tree walk only the
            # living); a run that settled had its look in _settle
            self._cpu_ns = max(self._cpu_ns, self._tree_cpu_ns() - self._cpu_base)
        self._kill()  # the caller cancelled, or the runtime is closing: not killed yet
        if self.pid is not None:
            with anyio.move_on_after(self.options.settle_timeout):
                if not self._exited.is_set():
                    await self._wait_exited()
                for fd in self._watched:  # "gone" means exited, not merely signalled
                    await anyio.wait_readable(fd)
            for fd in self._watched:
                close_fd(fd)
            self._watched = []
        if self.pid is not None and cgroup is not None:
            await self._wait_cgroup_empty(cgroup)
        if isinstance(self.outcome, RunError) and self.outcome.kind == "died":
            with anyio.move_on_after(self.options.settle_timeout):
                self.exit_status = await self.slot.wait_exit()
        if self._pidfd is not None:
            close_fd(self._pidfd)
            self._pidfd = None
        if "log" in self.slot.fds:
            await self._drain_logs()
        self.slot.close()
        self.slot.remove_workdir()

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

    async def _drain_logs(self) -> None:
        fd = self.slot.fds["log"]
        over = isinstance(self.outcome, RunError) and self.outcome.kind == "output_limit"
        with anyio.move_on_after(1.0):
            while not over:
                data = await read_some(fd)
                if not data:
                    break
                over = self._feed_logs(data)
        self._flush_logs()
