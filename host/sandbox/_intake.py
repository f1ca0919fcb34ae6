"""A run's intake: what comes from its child's pipes, a bounded chunk per wake-up.

The control pipe carries frames (calls, the report, a session's state), each decoded
against the tagged union and checked here; calls go to the ``CallServer`` and its workers.
The log pipe carries the program's output, into the run's ``LogIntake``. Part of ``Run``.
"""

from __future__ import annotations

import asyncio
import os
from typing import Any

import anyio
import anyio.abc
import msgspec

from host.sandbox._calls import CallServer, QueuedCall, reply_frame
from host.sandbox._fdio import FrameWriter
from host.sandbox._logs import LogIntake
from host.sandbox._options import RunOptions, SessionState
from host.sandbox._slot import ChildSlot
from host.sandbox._watchdog import Guard
from runtime import FailureKind, RunError, RunRequest, RunResult
from runtime.lowlevel import (
    CHILD_FAILURES,
    MAX_DEPTH,
    Call,
    CallLedger,
    ChildMessage,
    Compiled,
    Done,
    Failed,
    FrameBuffer,
    Ready,
    Reply,
    State,
    encode_frame,
    json_values_bound,
    nests_deeper_than,
)

__all__ = ("Intake", "decoder")

decoder = msgspec.json.Decoder(ChildMessage)
_value_decoder = msgspec.json.Decoder()
#: Bytes read from a pipe per wake-up: a child that keeps its pipes full cannot hold the
#: event loop (every other run, every budget) for longer than handling this much takes.
_CHUNK = 1 << 16
#: The longest ``output_limit`` report taken whatever the logs took (the child's own are short).
_LIMIT_REPORT_CHARS = 1024
#: What a frame's opening says it is (the tag comes first), for the message when it is too big.
_TOO_MANY: tuple[tuple[bytes, FailureKind, str], ...] = (
    (b'{"type":"Done"', "output_limit", "the result holds"),
    (b'{"type":"Call"', "invalid_completion", "the arguments of a binding call hold"),
    (b'{"type":"State"', "state", "the session state holds"),
    (b'{"type":"Failed"', "output_limit", "the failure report holds"),
)


def _asyncio_loop() -> asyncio.AbstractEventLoop | None:
    """The running asyncio loop, if that is the backend and it takes fd readers."""
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:  # trio
        return None
    return loop if hasattr(loop, "add_reader") else None


class Intake:
    """The frames and logs of a run's child (a part of ``Run``: the state is the run's)."""

    request: RunRequest
    ledger: CallLedger
    run_id: str
    options: RunOptions
    session: SessionState | None
    slot: ChildSlot
    guard: Guard
    logs: LogIntake
    calls: CallServer
    code: bytes
    value: Any
    value_is_repr: bool
    state: State | None
    _frames: FrameBuffer
    _writer: FrameWriter
    _compiled_by_child: bool
    _tg: anyio.abc.TaskGroup | None
    _resume: anyio.Event
    _exited: anyio.Event

    def _settle(self, outcome: RunResult | RunError) -> None:
        raise NotImplementedError

    async def _send(self, frame: bytes) -> None:
        raise NotImplementedError

    # ---- reading the child's pipes, a bounded chunk per wake-up ---------------------------

    async def _read_ctl(self) -> None:
        fd = self.slot.fds["from_child"]
        loop = _asyncio_loop()
        if loop is not None:
            await self._read_ctl_in_callback(loop, fd)
        else:
            while True:
                if self.calls.full:
                    self._resume = anyio.Event()
                    await self._resume.wait()
                await anyio.wait_readable(fd)
                data = self._read_chunk(fd)
                if data is None:
                    continue
                if not data:
                    break
                self._handle_ctl_bytes(data)
                self._start_workers()
        await self._bridge_closed()

    async def _read_ctl_in_callback(self, loop: asyncio.AbstractEventLoop, fd: int) -> None:
        """Under asyncio: handle frames in a reader callback as they arrive, until EOF.

        Waking this task for each frame would cost, per binding call, a loop iteration and
        two epoll_ctl calls more than the call's own work on the host. The callback never
        starts a task (no anyio call outside a task): it wakes this task to start workers.
        """
        state = {"eof": False, "reading": False}
        wake: list[asyncio.Future[None]] = [loop.create_future()]

        def on_readable() -> None:
            try:
                data = self._read_chunk(fd)
                if data is None:
                    return
                if data:
                    self._handle_ctl_bytes(data)
                    if not (self.calls.wants_worker or self.calls.full):
                        return
                else:
                    state["eof"] = True
            except BaseException as exc:  # our bug: raise it in the task, not in the loop
                stop_reading()
                if not wake[0].done():
                    wake[0].set_exception(exc)
                return
            if self.calls.full or state["eof"]:
                stop_reading()
            if not wake[0].done():
                wake[0].set_result(None)

        def start_reading() -> None:
            if not state["reading"]:
                loop.add_reader(fd, on_readable)
                state["reading"] = True

        def stop_reading() -> None:
            if state["reading"]:
                loop.remove_reader(fd)
                state["reading"] = False

        start_reading()
        try:
            while not state["eof"]:
                await wake[0]
                wake[0] = loop.create_future()
                self._start_workers()
                if self.calls.full and not state["eof"]:
                    self._resume = anyio.Event()
                    await self._resume.wait()
                    start_reading()
        finally:
            stop_reading()

    def _read_chunk(self, fd: int) -> bytes | None:
        try:
            return os.read(fd, _CHUNK)
        except BlockingIOError:
            return None
        except OSError:
            return b""

    async def _bridge_closed(self) -> None:
        if self.guard.outcome is None:
            # A child that exits closes this pipe too: give its exit a moment to show.
            with anyio.move_on_after(0.5):
                await self._exited.wait()
            message = (
                ""  # filled in from the exit status
                if self._exited.is_set()
                else "the child closed its end of the bridge before reporting a result"
            )
            self._settle(RunError(kind="died", message=message))

    def _handle_ctl_bytes(self, data: bytes) -> None:
        for body in self._frames.feed(data):
            # a value takes a byte at least: a frame no longer than the bound is not counted
            if len(body) > self.options.max_json_values and self._too_many_values(body):
                continue
            try:
                message = decoder.decode(body)
            except (msgspec.DecodeError, msgspec.ValidationError, RecursionError, MemoryError):
                self.calls.dropped += 1
                continue
            if self.guard.outcome is not None:
                self.calls.dropped += 1
                continue
            if isinstance(message, Call):
                self.calls.admit(message)
            elif isinstance(message, Ready):
                self.calls.dropped += 1  # said once, before the program: this one is forged
            elif isinstance(message, Compiled):
                if self.code or self._compiled_by_child:
                    self.calls.dropped += 1  # we compiled it, or it was said already: forged
                self._compiled_by_child = True
            elif isinstance(message, State):
                if self.session is None or self.state is not None:
                    self.calls.dropped += 1  # not a session run, or said already: forged
                elif len(message.blob) > self.session.max_bytes:
                    # the child checks this too; the host's check is the one that holds
                    self._settle(
                        RunError(
                            kind="state",
                            message=f"the session state ({len(message.blob)} bytes) passed "
                            f"max_state_bytes ({self.session.max_bytes})",
                        )
                    )
                else:
                    self.state = message
            elif isinstance(message, Done):
                self._on_done(message)
            else:
                self._on_failed(message)

    def _too_many_values(self, body: bytes) -> bool:
        """Settle the run if decoding ``body`` would make more values than the host takes."""
        limit = self.options.max_json_values
        if json_values_bound(body, limit) <= limit:
            return False
        if self.guard.outcome is not None:
            self.calls.dropped += 1
            return True
        for opening, kind, what in _TOO_MANY:
            if body.startswith(opening):
                self._settle(
                    RunError(
                        kind=kind,
                        message=f"{what} more than {limit} JSON values "
                        "(max_json_values): return or pass less, or summarise it first",
                    )
                )
                return True
        self.calls.dropped += 1
        return True

    def _on_done(self, done: Done) -> None:
        if not done.has_value:
            self._settle(RunResult(logs=[]))
            return
        raw = bytes(done.value)
        if self.logs.bytes + len(raw) > self.request.limits.max_output_bytes:
            self._settle(
                RunError(
                    kind="output_limit",
                    message=f"the result ({len(raw)} bytes of JSON) and the logs passed "
                    f"max_output_bytes ({self.request.limits.max_output_bytes})",
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
        # msgspec refused every other way not to be lossless JSON; nothing per value here
        problem = (
            f"nesting deeper than {MAX_DEPTH} levels" if nests_deeper_than(raw, MAX_DEPTH) else None
        )
        if problem is None and done.is_repr and not isinstance(value, str):
            problem = "a repr that is not a string"  # only a forged report says so
        if problem is not None:
            self._settle(
                RunError(
                    kind="invalid_completion", message=f"the result is not lossless JSON: {problem}"
                )
            )
            return
        self.value, self.value_is_repr = value, done.is_repr
        self._settle(RunResult(logs=[], value=value))

    def _on_failed(self, failed: Failed) -> None:
        # `parse` only from a child left the compiling, and only before it said it compiled
        if failed.kind == "parse" and (self.code or self._compiled_by_child):
            self.calls.dropped += 1
            return
        assert failed.kind in CHILD_FAILURES
        size = len(failed.message) + len(failed.traceback or "") + len(failed.exception_type or "")
        # An output_limit report is the child's own short text on the cap (the result was too
        # big, say): it passes whatever the logs took; a longer one is not believed.
        short_limit = failed.kind == "output_limit" and size <= _LIMIT_REPORT_CHARS
        if not short_limit and self.logs.bytes + size > self.request.limits.max_output_bytes:
            self._settle(
                RunError(
                    kind="output_limit",
                    message=f"the failure report ({size} characters) and the logs passed "
                    f"max_output_bytes ({self.request.limits.max_output_bytes})",
                )
            )
            return
        self._settle(
            RunError(
                kind=failed.kind,
                message=failed.message,
                exception_type=failed.exception_type,
                traceback=failed.traceback,
                lineno=failed.lineno,
            )
        )

    # ---- binding calls -------------------------------------------------------------------

    def _start_workers(self) -> None:
        tg = self._tg
        while tg is not None and self.calls.wants_worker:
            self.calls.workers += 1
            tg.start_soon(self._serve_calls)

    async def _serve_calls(self) -> None:
        """A worker: serves calls one at a time until the run settles."""
        while (call := await self.calls.next_call()) is not None:
            try:
                await self._serve(call)
            finally:
                self.calls.done(call)
                if not self.calls.full and not self._resume.is_set():
                    self._resume.set()

    async def _serve(self, call: QueuedCall) -> None:
        # the ledger records it, replays it, or holds it (then no reply: the run pauses)
        settled = await self.ledger.serve(
            call.id, call.name, call.args, call.binding, max_value=self._max_value(call.id)
        )
        if settled is not None and self.guard.outcome is None:
            await self._send(reply_frame(call, settled))

    def _max_value(self, call_id: int) -> int:
        """The largest value a reply to ``call_id`` carries within ``max_frame_bytes``."""
        return self.options.max_frame_bytes - len(encode_frame(Reply(id=call_id, value=None))) + 4

    # ---- logs, exit, progress, abort ------------------------------------------------------

    async def _read_logs(self) -> None:
        fd = self.slot.fds["log"]
        while True:
            await anyio.wait_readable(fd)
            data = self._read_chunk(fd)
            if data is None:
                continue
            if not data:
                return
            self._take_logs(data)

    def _take_logs(self, data: bytes) -> None:
        self.logs.feed(data)
        if self.logs.over is not None:
            self._output_over()

    def _output_over(self) -> None:
        error = RunError(kind="output_limit", message=self.logs.over or "")
        if isinstance(self.guard.outcome, RunResult):
            # The child counted only what passed through sys.stdout/stderr; raw writes to
            # fd 1 count too, and the host's count is the one that holds.
            self.value = msgspec.UNSET
            self.guard.outcome = error
        else:
            self._settle(error)

    def _drain_ctl(self) -> None:
        # The child wrote its last frame before it exited: it is in the pipe already.
        fd = self.slot.fds["from_child"]
        while self.guard.outcome is None:
            data = self._read_chunk(fd)
            if not data:
                return
            self._handle_ctl_bytes(data)

    def _drain_logs(self) -> None:
        """What is in the log pipe now: written before the kill (no process can add to it)."""
        fd = self.slot.fds.get("log")
        while fd is not None and self.logs.over is None:
            data = self._read_chunk(fd)
            if not data:
                break
            self._take_logs(data)
        self.logs.close()
