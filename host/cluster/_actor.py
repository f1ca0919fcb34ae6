"""The actor on each node: owns a ``SubprocessRuntime`` and runs programs for one caller.

It runs inside a Ray worker, on the asyncio loop of an async actor. Each run is a
streaming generator: the program's log lines and binding calls go to the caller as
batches of events as they happen; the caller's replies come back through ``reply``.
Ray is imported only inside methods, so the caller can import this module without it.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import inspect
import logging
import os
import socket
from collections.abc import AsyncGenerator
from typing import Any

import msgspec

from host.cluster._wire import (
    PROTOCOL,
    Answer,
    CallOut,
    Event,
    Finished,
    Logs,
    NodeInfo,
    Progress,
    Refusal,
    Refused,
    Started,
    decode_replies,
    decode_request,
    encode,
    forwarded_fields,
)
from runtime._contract import Binding, RunStats
from runtime._errors import RuntimeClosedError, RuntimeUsageError, ToolCallError

__all__ = ("NodeActor",)

_log = logging.getLogger("host.cluster")
#: Seconds into a run after which the actor says ``Started`` even with nothing else to send.
STARTED_AFTER_S = 0.01
#: Aborts of runs not seen yet that an actor remembers (the oldest are forgotten).
_EARLY_ABORTS_KEPT = 1000


def _anyio_context() -> contextvars.Context:
    """A context in which anyio knows it runs on asyncio, even in a loop callback.

    Ray started this loop, not ``anyio.run``: with sniffio installed, anyio finds the
    backend from the current task, and a callback of ``loop.add_reader`` (how the node's
    runtime reads its child) has none.
    """
    context = contextvars.copy_context()
    try:
        import sniffio
    except ImportError:  # anyio then asks asyncio for the running loop, which works
        return context
    context.run(sniffio.current_async_library_cvar.set, "asyncio")
    return context


class _NodeRun:
    """One run's mailbox: events waiting for the caller, calls waiting for a reply."""

    def __init__(self) -> None:
        self.events: list[Event] = []
        self.lines: list[str] = []
        self.wake = asyncio.Event()
        self.abort = asyncio.Event()
        self.pending: dict[int, asyncio.Future[Answer | Refusal]] = {}
        self.next_id = 0

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
            self.next_id += 1
            call_id = self.next_id
            reply: asyncio.Future[Answer | Refusal] = asyncio.get_running_loop().create_future()
            self.pending[call_id] = reply
            self.emit(CallOut(id=call_id, name=name, args=args))
            try:
                answer = await reply
            finally:
                self.pending.pop(call_id, None)
            if isinstance(answer, Refusal):
                raise ToolCallError(answer.tool, answer.message, answer.code)
            return answer.value

        return call


class NodeActor:
    """Runs programs on its node in fresh contained children, for one ``RayRuntime``."""

    def __init__(self, runtime_options: bytes) -> None:
        from host.sandbox import SubprocessRuntime

        options: dict[str, Any] = msgspec.json.decode(runtime_options)
        self._options = options
        self._runtime = SubprocessRuntime(**options)
        self._runs: dict[int, _NodeRun] = {}
        self._early_aborts: dict[int, None] = {}  # aborts that came before their run

    async def ready(self) -> bytes:
        """Start the node's runtime (its template) and say what the node offers."""
        await self._runtime.start()
        from host.cluster._ray import import_ray
        from host.sandbox import SubprocessRuntime

        ray = import_ray()

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

    async def run(self, run_id: int, submission: bytes) -> AsyncGenerator[bytes, None]:
        """Run one program; yields batches of events, ``Finished`` or ``Refused`` last."""
        node_run = _NodeRun()
        self._runs[run_id] = node_run
        if run_id in self._early_aborts:
            del self._early_aborts[run_id]
            node_run.abort.set()
        task: asyncio.Task[Any] | None = None
        timer: asyncio.TimerHandle | None = None
        try:
            try:
                request = decode_request(
                    submission,
                    binding=node_run.binding,
                    on_log=node_run.log,
                    abort=node_run.abort,
                    on_progress=node_run.progress,
                )
            except RuntimeUsageError as exc:
                yield encode([Refused(message=str(exc), node_trouble=False)])
                return
            loop = asyncio.get_running_loop()
            task = loop.create_task(self._runtime.run(request), context=_anyio_context())
            task.add_done_callback(lambda _: node_run.wake.set())
            # `Started` goes with the run's first batch, or alone once it has run a moment:
            # a short run costs one message, not two
            timer = loop.call_later(STARTED_AFTER_S, node_run.wake.set)
            started = False
            while True:
                await node_run.wake.wait()
                node_run.wake.clear()
                batch = node_run.take()
                if not started and (batch or task.done() or timer.when() <= loop.time()):
                    timer.cancel()
                    started = True
                    batch.insert(0, Started())
                if task.done():
                    batch.append(self._last(task))
                    yield encode(batch)
                    return
                if batch:
                    yield encode(batch)
        finally:
            if timer is not None:
                timer.cancel()
            self._runs.pop(run_id, None)
            for reply in node_run.pending.values():
                reply.cancel()
            if task is not None and not task.done():
                # the stream was dropped (the caller is gone): the run ends as `aborted`
                node_run.abort.set()
                with contextlib.suppress(BaseException):
                    await task

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
        """The caller's answers to binding calls; late or unknown answers are dropped."""
        node_run = self._runs.get(run_id)
        if node_run is None:
            return
        try:
            messages = decode_replies(replies)
        except msgspec.DecodeError:
            _log.warning("dsh-code: unreadable replies for run %d were dropped", run_id)
            return
        for message in messages:
            waiting = node_run.pending.get(message.id)
            if waiting is not None and not waiting.done():
                waiting.set_result(message)

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
