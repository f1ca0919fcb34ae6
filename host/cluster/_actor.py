"""The actor on each node: owns a ``SubprocessRuntime`` and runs programs for one caller.

It runs inside a Ray worker, on the asyncio loop of an async actor. A run is a chain of
plain actor calls, one at a time: ``start`` sends the program and returns the run's first
batch of events, each ``exchange`` brings the caller's replies and returns the next batch
(the program's log lines and binding calls, as they happened), the last one holding
``Finished``. A plain call costs Ray about half what a streamed item does. Replies that
are ready while an exchange waits come through ``reply``. Ray is imported only inside
methods, so the caller can import this module without it.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import inspect
import logging
import os
import socket
import time
from collections.abc import Callable
from typing import Any

import msgspec

from host.cluster._wire import (
    PROTOCOL,
    Answer,
    CallOut,
    Event,
    Finished,
    Held,
    Logs,
    NodeInfo,
    Progress,
    Refusal,
    Refused,
    Started,
    decode_replies,
    decode_request,
    decode_resume,
    encode,
    forwarded_fields,
)
from host.telemetry import TelemetrySetupError, otlp_requested, setup_otlp, traced_by_caller
from runtime import (
    Binding,
    HoldCall,
    RunStats,
    RuntimeClosedError,
    RuntimeUsageError,
    current_call,
)
from runtime.lowlevel import tool_call_error

__all__ = ("NodeActor",)

_log = logging.getLogger("host.cluster")
#: Seconds into a run after which the actor says ``Started`` even with nothing else to send.
STARTED_AFTER_S = 0.01
#: Aborts of runs not seen yet that an actor remembers (the oldest are forgotten).
_EARLY_ABORTS_KEPT = 1000
#: Seconds a finished run whose last batch nobody asked for is kept (a caller gone astray).
_UNCLAIMED_S = 60.0


def _export_telemetry() -> Callable[[], None] | None:
    """OTLP export from this node when the ``OTEL_*`` variables of its workers ask for it
    (and no tracer provider is set already): its shutdown, else None."""
    if not otlp_requested():
        return None
    try:
        return setup_otlp(service_name="dsh-code-node")
    except TelemetrySetupError as exc:
        _log.warning("dsh-code: no OTLP export from this node: %s", exc)
        return None


def _replies(data: bytes, run_id: int) -> list[Answer | Refusal | Held]:
    try:
        return decode_replies(data)
    except msgspec.DecodeError:
        _log.warning("dsh-code: unreadable replies for run %d were dropped", run_id)
        return []


class _NodeRun:
    """One run's mailbox: events waiting for the caller, calls waiting for a reply."""

    def __init__(self) -> None:
        self.events: list[Event] = []
        self.lines: list[str] = []
        self.wake = asyncio.Event()
        self.abort = asyncio.Event()
        self.pending: dict[int, asyncio.Future[Answer | Refusal | Held]] = {}
        self.next_id = 0
        self.task: asyncio.Task[Any] | None = None
        self.timer: asyncio.TimerHandle | None = None
        self.started = False
        self.over = False  # its last batch has been handed out
        self.busy = False  # a start or an exchange waits for its next batch
        self.asked_at = time.monotonic()

    async def next_batch(self, last: Any) -> bytes:
        """The run's next batch of events, waiting for one; ``Started`` leads the first,
        and the last ends with ``last(task)`` (``Finished`` or ``Refused``)."""
        task = self.task
        assert task is not None and self.timer is not None
        loop = asyncio.get_running_loop()
        while True:
            await self.wake.wait()
            self.wake.clear()
            batch = self.take()
            if not self.started and (batch or task.done() or self.timer.when() <= loop.time()):
                # `Started` goes with the run's first batch, or alone once it has run a
                # moment: a short run costs one call, not two
                self.timer.cancel()
                self.started = True
                batch.insert(0, Started())
            if task.done():
                batch.append(last(task))
                self.over = True
                return encode(batch)
            if batch:
                return encode(batch)

    def deliver(self, replies: list[Answer | Refusal | Held]) -> None:
        """Hand the caller's replies to the calls waiting for them; others are dropped."""
        for message in replies:
            waiting = self.pending.get(message.id)
            if waiting is not None and not waiting.done():
                waiting.set_result(message)

    async def end(self) -> None:
        """Abort the run if it is still going and wait for it; cancel waiting calls."""
        if self.timer is not None:
            self.timer.cancel()
        for reply in self.pending.values():
            reply.cancel()
        if self.task is not None and not self.task.done():
            self.abort.set()
            with contextlib.suppress(BaseException):
                await self.task

    def emit(self, event: Event) -> None:
        self._flush_lines()  # a line written before a call arrives before the call
        self.events.append(event)
        self.wake.set()

    def log(self, line: str) -> None:
        self.lines.append(line)
        self.wake.set()

    def progress(self, stats: RunStats) -> None:
        self.emit(Progress(stats=stats))

    def take(self) -> list[Event]:
        self._flush_lines()
        events, self.events = self.events, []
        return events

    def _flush_lines(self) -> None:
        if self.lines:
            self.events.append(Logs(lines=self.lines))
            self.lines = []

    def binding(self, name: str) -> Binding:
        """The stand-in the node's runtime calls: asks the caller and waits for its reply."""

        async def call(args: Any) -> Any:
            # the call's place in the program's order (a replay answers some on the node, and
            # an unknown name is answered there: a count of our own would drift from it)
            info = current_call.get()
            self.next_id += 1
            call_id = info.seq if info is not None else self.next_id
            reply: asyncio.Future[Answer | Refusal | Held] = (
                asyncio.get_running_loop().create_future()
            )
            self.pending[call_id] = reply
            approved = info is not None and info.approved  # a resume allowed this held call
            self.emit(CallOut(id=call_id, name=name, args=args, approved=approved))
            try:
                answer = await reply
            finally:
                self.pending.pop(call_id, None)
            if isinstance(answer, Refusal):
                raise tool_call_error(
                    answer.tool, answer.message, answer.code, answer.exception_type
                )
            if isinstance(answer, Held):
                raise HoldCall(answer.reason)
            return answer.value

        return call


class NodeActor:
    """Runs programs on its node in fresh contained children, for one ``RayRuntime``."""

    def __init__(self, runtime_options: bytes) -> None:
        from host.sandbox import SubprocessRuntime

        options: dict[str, Any] = msgspec.json.decode(runtime_options)
        self._options = options
        self._flush_telemetry = _export_telemetry()
        self._runtime = SubprocessRuntime(**options)
        self._runs: dict[int, _NodeRun] = {}
        self._early_aborts: dict[int, None] = {}  # aborts that came before their run

    async def ready(self) -> bytes:
        """Start the node's runtime (its template) and say what the node offers."""
        await self._runtime.start()
        from host.sandbox import SubprocessRuntime

        ray = importlib.import_module("ray")  # an actor runs in a Ray worker: Ray is there

        context = ray.get_runtime_context()
        default = inspect.signature(SubprocessRuntime).parameters["max_concurrent_runs"].default
        info = NodeInfo(
            protocol=PROTOCOL,
            fields=list(forwarded_fields()),
            node_id=context.get_node_id(),
            host=socket.gethostname(),
            address=ray.util.get_node_ip_address(),
            pid=os.getpid(),
            isolation=self._runtime.isolation,
            why_not_namespaces=self._runtime.why_not_namespaces,
            cgroups=list(self._runtime.cgroups),
            max_concurrent_runs=int(self._options.get("max_concurrent_runs", default)),
        )
        return encode(info)

    async def ping(self) -> bytes:
        """Answer at once: the caller's proof that this actor and its node still respond."""
        return b""

    async def start(self, run_id: int, submission: bytes) -> bytes:
        """Start one program; returns its first batch of events."""
        self._sweep()
        node_run = _NodeRun()
        trace: dict[str, str] = {}
        try:
            request = decode_request(
                submission,
                binding=node_run.binding,
                on_log=node_run.log,
                abort=node_run.abort,
                on_progress=node_run.progress,
                trace=trace,
            )
            resume, decisions = decode_resume(submission)
        except RuntimeUsageError as exc:
            return encode([Refused(message=str(exc), node_trouble=False)])
        self._runs[run_id] = node_run
        if run_id in self._early_aborts:
            del self._early_aborts[run_id]
            node_run.abort.set()
        loop = asyncio.get_running_loop()
        with traced_by_caller(trace):  # the task keeps the caller's trace as its context
            node_run.task = loop.create_task(
                self._runtime.run(request, resume=resume, decisions=decisions)
            )
        node_run.task.add_done_callback(lambda _: node_run.wake.set())
        node_run.timer = loop.call_later(STARTED_AFTER_S, node_run.wake.set)
        return await self._next(run_id, node_run)

    async def exchange(self, run_id: int, replies: bytes) -> bytes:
        """Take the caller's replies; returns the run's next batch of events."""
        node_run = self._runs.get(run_id)
        if node_run is None or node_run.busy:  # the caller's bug: it fails this run only
            raise RuntimeError(f"this node has no run {run_id} waiting for an exchange")
        node_run.deliver(_replies(replies, run_id))
        return await self._next(run_id, node_run)

    async def _next(self, run_id: int, node_run: _NodeRun) -> bytes:
        node_run.busy = True
        try:
            data = await node_run.next_batch(self._last)
        except BaseException:
            # this call was cancelled (the actor is going away): so is the run
            self._runs.pop(run_id, None)
            with contextlib.suppress(BaseException):
                await node_run.end()
            raise
        finally:
            node_run.busy = False
            node_run.asked_at = time.monotonic()
        if node_run.over:
            self._runs.pop(run_id, None)
            await node_run.end()
        return data

    def _sweep(self) -> None:
        """Forget finished runs whose last batch nobody came for."""
        now = time.monotonic()
        for run_id, node_run in list(self._runs.items()):
            task = node_run.task
            unclaimed = now - node_run.asked_at > _UNCLAIMED_S
            if task is not None and task.done() and not node_run.busy and unclaimed:
                del self._runs[run_id]

    def _last(self, task: asyncio.Task[Any]) -> Event:
        try:
            result = task.result()
        except RuntimeClosedError as exc:
            return Refused(message=str(exc), node_trouble=True)
        except RuntimeUsageError as exc:
            # a template that cannot start is the node's trouble, not the request's
            trouble = type(exc).__name__ == "TemplateStartError"
            return Refused(message=str(exc), node_trouble=trouble)
        return Finished(result=msgspec.structs.replace(result, logs=[]))

    async def reply(self, run_id: int, replies: bytes) -> None:
        """Replies that became ready while an exchange was waiting."""
        node_run = self._runs.get(run_id)
        if node_run is not None:
            node_run.deliver(_replies(replies, run_id))

    async def abort(self, run_id: int) -> None:
        """Abort a run (it settles as ``aborted`` and reports ``Finished``)."""
        node_run = self._runs.get(run_id)
        if node_run is not None:
            node_run.abort.set()
        else:  # Ray may start it before its run: the run sees it when it starts
            self._early_aborts[run_id] = None
            while len(self._early_aborts) > _EARLY_ABORTS_KEPT:
                del self._early_aborts[next(iter(self._early_aborts))]

    async def close(self) -> None:
        """Abort the node's runs and wait until every child has exited."""
        await self._runtime.aclose()
        if self._flush_telemetry is not None:
            await asyncio.to_thread(self._flush_telemetry)
