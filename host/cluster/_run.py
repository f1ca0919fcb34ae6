"""One run on a node, seen from the caller: send it, serve its binding calls, settle it.

The steps: ``execute`` -> ``_exchange`` (a chain of actor calls, one at a time: ``start``
returns the run's first batch of events, each ``exchange`` takes the replies so far and
returns the next batch; each ``CallOut`` is served by the caller's binding in a task of
its own) -> the result. Replies of the calls of a batch ride on the next exchange when
they are ready within ``_REPLY_GRACE_S``; later ones go alone (``reply``). The caller's
cancellation, an abort, or a binding's bad value ask the node to abort and still wait for
its ``Finished`` (bounded), so that when ``execute`` returns the run's child is gone. A
call that fails with a Ray error means the node or its actor is lost: the run is
``died``, or, if the node never said ``Started``, ``NotStarted``.
"""

from __future__ import annotations

import concurrent.futures
import secrets
import time
from collections.abc import Callable, Mapping
from typing import Any

import anyio
import msgspec

from host.cluster._pool import Node
from host.cluster._ray import RayBackend, error_text, soon_caller, wait_future
from host.cluster._stats import ClusterRunStats
from host.cluster._wire import (
    Answer,
    CallOut,
    Finished,
    Held,
    Logs,
    Progress,
    Refusal,
    Refused,
    Started,
    decode_events,
    encode,
    encode_request,
)
from host.telemetry import trace_carrier
from runtime import (
    CallInfo,
    Decision,
    HoldCall,
    Journal,
    RunError,
    RunRequest,
    RunResult,
    RunStats,
    RuntimeUsageError,
    current_call,
)
from runtime.lowlevel import builtin_exception_name, json_problem

__all__ = ("ClusterRun", "NodeLost", "NotStarted")

#: Seconds the caller waits for the calls of a batch to be answered before it asks for the
#: next batch without them (their replies then go alone).
_REPLY_GRACE_S = 0.005


class NodeLost(Exception):
    """A run's actor call failed before ``Finished``: the node or its actor is gone."""

    def __init__(self, why: str, *, started: bool, node_gone: bool = True) -> None:
        super().__init__(why)
        self.why = why
        self.started = started
        self.node_gone = node_gone
        """False when only this run failed there (its actor's method raised): the node
        stays in use."""


class NotStarted(msgspec.Struct, frozen=True):
    """The node was lost before it took the run: it may run on another node."""

    why: str


class ClusterRun:
    """The caller's side of one run on ``node``."""

    def __init__(
        self,
        request: RunRequest,
        node: Node,
        backend: RayBackend,
        run_id: int,
        *,
        unresponsive_s: float,
        retried_from: str | None = None,
        resume: Journal | None = None,
        decisions: Mapping[str, Decision] | None = None,
    ) -> None:
        self.request = request
        self.node = node
        self.backend = backend
        self.run_id = run_id
        self.resume = resume
        self.decisions = decisions
        given = resume.run_id if resume is not None else request.run_id
        self.public_id = given or secrets.token_hex(8)
        """The id bindings see in ``current_call`` (``run_id`` is the node's number); the
        node's run, and its journal, have it too."""
        self.unresponsive_s = unresponsive_s
        self.retried_from = retried_from
        self.logs: list[str] = []
        self.started = False
        self.finished: RunResult | None = None
        self.override: RunError | None = None  # the caller settled it first (a bad value)
        self.progress: RunStats | None = None
        self.calls = 0
        self._pending: concurrent.futures.Future[bytes] | None = None  # start or exchange
        self._answered: anyio.Event | None = None  # set when every call of a batch answered
        self._heard_at = time.monotonic()
        self._began = time.monotonic()
        self._aborted = False
        self._outbox: list[Answer | Refusal | Held] = []
        self._serving = 0  # binding calls of this run in flight here
        self._soon: Callable[[Callable[[], object]], None] = lambda callback: None
        self.lost_node: str | None = None
        """Why the node was lost under this run (the pool stops using it), else None."""

    async def execute(self) -> RunResult | NotStarted:
        """Run to the end; a ``RunResult`` whatever happened, or ``NotStarted``."""
        submission = encode_request(
            msgspec.structs.replace(self.request, run_id=self.public_id),
            progress=self.request.on_progress is not None,
            resume=self.resume,
            decisions=self.decisions,
            trace=trace_carrier(),
        )
        self._soon = soon_caller()
        try:
            self._pending = self.backend.start(self.node.actor, self.run_id, submission)
        except Exception as exc:  # the actor's handle is no good any more
            self.lost_node = error_text(exc)
            return NotStarted(self.lost_node)
        cancelled: str | None = None
        lost: NodeLost | None = None
        try:
            await self._exchange(serve=True)
        except NodeLost as exc:
            lost = exc
        except anyio.get_cancelled_exc_class():
            cancelled = "the caller cancelled the run"
        if cancelled is not None:
            # like a local run: the caller's cancellation settles it as `aborted`, and the
            # child is gone before we return
            self.override = self.override or RunError(kind="aborted", message=cancelled)
            with anyio.CancelScope(shield=True):
                lost = await self._drain()
        if lost is not None:
            self.lost_node = lost.why if lost.node_gone else None
            if self.override is None:
                return self._died(lost) if lost.started else NotStarted(lost.why)
        return self._result()  # the caller settled it first (cancelled, closed, a bad value)

    def abort(self, reason: str) -> None:
        """Settle as ``aborted`` with ``reason`` (the runtime is closing); the node aborts it."""
        if self.finished is None and self.override is None:
            self.override = RunError(kind="aborted", message=reason)
        self._send_abort()

    async def _drain(self) -> NodeLost | None:
        """After the caller gave up: abort on the node and read on to its ``Finished``."""
        self._send_abort()
        try:
            with anyio.fail_after(self.unresponsive_s):
                await self._exchange(serve=False)
        except NodeLost as exc:
            return exc
        except TimeoutError:
            return NodeLost(
                f"it did not end the run within {self.unresponsive_s:g} s of the abort",
                started=self.started,
            )
        return None

    # ---- the exchanges ---------------------------------------------------------------

    async def _exchange(self, *, serve: bool) -> None:
        """Read batches until ``Finished``; raises ``NodeLost`` if a call fails, or
        ``RuntimeUsageError`` if the node refused the request."""
        self._lost: NodeLost | None = None
        self._refused: str | None = None
        async with anyio.create_task_group() as tg:
            if serve and self.request.abort is not None:
                tg.start_soon(self._watch_abort)
            tg.start_soon(self._watch_node, tg.cancel_scope)
            await self._read(tg if serve else None)
            tg.cancel_scope.cancel()  # in-flight binding calls end with the run, as locally
        if self._lost is not None:
            raise self._lost
        if self._refused is not None:
            raise RuntimeUsageError(self._refused)

    async def _read(self, tg: anyio.abc.TaskGroup | None) -> None:
        while self.finished is None and self._lost is None and self._refused is None:
            if self._pending is None:  # ask for the next batch, with the replies so far
                replies, self._outbox = self._outbox, []
                try:
                    self._pending = self.backend.exchange(
                        self.node.actor, self.run_id, encode(replies)
                    )
                except Exception as exc:
                    self._lose(error_text(exc))
                    return
            try:
                data = await wait_future(self._pending)
            except Exception as exc:
                if self.backend.is_task_error(exc):
                    self._lose(f"the node's actor failed: {error_text(exc)}", node_gone=False)
                else:
                    self._lose(error_text(exc))
                return
            finally:
                if self._pending is not None and self._pending.done():
                    self._pending = None
            self._heard_at = time.monotonic()
            try:
                events = decode_events(data)
            except msgspec.DecodeError as exc:
                # what it held is unknown (calls, lines): not safe to run again elsewhere
                self._lose(f"it sent an unreadable batch: {exc}", started=True)
                return
            for event in events:
                self._on_event(event, tg)
            if self._serving and self.finished is None:
                # the calls just started usually answer at once: their replies go along
                # with the next exchange rather than in calls of their own
                self._answered = anyio.Event()
                with anyio.move_on_after(_REPLY_GRACE_S):
                    await self._answered.wait()
                self._answered = None

    def _lose(self, why: str, *, started: bool | None = None, node_gone: bool = True) -> None:
        if self._lost is None:
            self._lost = NodeLost(
                why, started=self.started if started is None else started, node_gone=node_gone
            )

    def _on_event(self, event: Any, tg: anyio.abc.TaskGroup | None) -> None:
        match event:
            case Logs(lines=lines):
                self._on_logs(lines)
            case CallOut():
                self.calls += 1
                if tg is not None:
                    self._serving += 1  # counted now: calls of one batch answer together
                    tg.start_soon(self._serve_call, event)
            case Progress(stats=stats):
                self._on_progress(stats)
            case Finished(result=result):
                self.finished = result
            case Started():
                self.started = True
            case Refused(message=message, node_trouble=node_trouble):
                if node_trouble:
                    self._lose(message, started=False)
                else:
                    self._refused = message

    def _on_logs(self, lines: list[str]) -> None:
        self.logs.extend(lines)
        on_log = self.request.on_log
        if on_log is not None:
            for line in lines:
                try:
                    on_log(line)
                except Exception:
                    pass  # an observer's bug must not break the run

    def _on_progress(self, stats: RunStats) -> None:
        self.progress = stats
        on_progress = self.request.on_progress
        if on_progress is not None:
            try:
                on_progress(self._stats(stats))
            except Exception:
                pass

    async def _serve_call(self, call: CallOut) -> None:
        """Answer one binding call with the caller's own binding."""
        try:
            reply = await self._answer(call)
        finally:
            self._serving -= 1
        if reply is None:
            return
        self._outbox.append(reply)
        if self._pending is None:  # the next exchange is not sent yet: it takes the reply
            if self._serving == 0 and self._answered is not None:
                self._answered.set()
        elif self._serving == 0:
            self._flush()  # an exchange waits: the reply goes alone, at once
        elif len(self._outbox) == 1:  # others may finish in this same moment: send together
            self._soon(self._flush)

    async def _answer(self, call: CallOut) -> Answer | Refusal | Held | None:
        """The reply to ``call``; None when its value settled the run instead."""
        binding = self.request.bindings.get(call.name)
        reply: Answer | Refusal | Held
        if binding is None:
            reply = Refusal(
                id=call.id,
                tool=call.name,
                message=f"no binding named {call.name!r}",
                code="UNKNOWN_TOOL",
            )
        else:
            token = current_call.set(CallInfo(self.public_id, call.id, call.approved))
            try:
                value = await binding(call.args)
            except HoldCall as held:
                reply = Held(id=call.id, reason=held.reason)
            except Exception as exc:
                code = getattr(exc, "code", None)
                tool = getattr(exc, "tool", None)
                reply = Refusal(
                    id=call.id,
                    tool=tool if isinstance(tool, str) else call.name,
                    message=str(getattr(exc, "message", "") or exc) or type(exc).__name__,
                    code=code if isinstance(code, str) else "TOOL_ERROR",
                    exception_type=builtin_exception_name(exc),
                )
            else:
                problem = json_problem(value)
                if problem is not None:
                    if self.finished is None and self.override is None:
                        self.override = RunError(
                            kind="invalid_completion",
                            message=f"binding {call.name} returned a value that is not "
                            f"lossless JSON: {problem}",
                        )
                    self._send_abort()
                    return None
                reply = Answer(id=call.id, value=value)
            finally:
                current_call.reset(token)
        return reply

    def _flush(self) -> None:
        if self._pending is None:
            return  # the next exchange takes them
        replies, self._outbox = self._outbox, []
        if replies and self.finished is None and self.override is None:
            self.backend.reply(self.node.actor, self.run_id, encode(replies))

    async def _watch_abort(self) -> None:
        abort = self.request.abort
        assert abort is not None
        await abort.wait()
        self._send_abort()

    def _send_abort(self) -> None:
        if not self._aborted and self.finished is None:
            self._aborted = True
            self.backend.abort(self.node.actor, self.run_id)

    async def _watch_node(self, scope: anyio.CancelScope) -> None:
        """While the node is silent, ping its actor now and then; a node that does not
        answer within ``unresponsive_s`` is taken as lost (a frozen or cut-off node sends
        no error of its own)."""
        every = self.unresponsive_s / 3
        while True:
            await anyio.sleep(max(every - (time.monotonic() - self._heard_at), 0.0))
            if time.monotonic() - self._heard_at < every:
                continue
            answered = False
            with anyio.move_on_after(self.unresponsive_s):
                try:
                    await wait_future(self.backend.ping(self.node.actor))
                except Exception as exc:
                    self._lose(error_text(exc))
                    scope.cancel()
                    return
                answered = True
            if not answered:
                self._lose(f"it did not answer a ping within {self.unresponsive_s:g} s")
                scope.cancel()
                return
            self._heard_at = time.monotonic()

    # ---- the result --------------------------------------------------------------------

    def _stats(self, stats: RunStats | None) -> ClusterRunStats:
        if stats is None:
            info = self.node.info
            stats = RunStats(
                isolation=info.isolation if info is not None else "unknown",
                compute_ms=0.0,
                wall_ms=round((time.monotonic() - self._began) * 1000, 3),
                calls=self.calls,
                dropped_frames=0,
            )
        fields = msgspec.structs.asdict(stats)
        fields["node"] = self.node.node_id
        return ClusterRunStats(**fields, retried_from=self.retried_from)

    def _result(self) -> RunResult:
        finished = self.finished
        stats = self._stats(finished.stats if finished is not None else self.progress)
        if self.override is not None:
            journal = finished.journal if finished is not None else None  # what the node kept
            return RunResult(logs=self.logs, error=self.override, stats=stats, journal=journal)
        assert finished is not None
        return msgspec.structs.replace(finished, logs=self.logs, stats=stats)

    def _died(self, lost: NodeLost) -> RunResult:
        if lost.node_gone:
            message = f"the node {self.node.label} died or stopped answering during the run: "
        else:
            message = f"the run failed on the node {self.node.label}: "
        message += lost.why
        stats = self._stats(self.progress)
        if self.progress is not None:
            stats = msgspec.structs.replace(
                stats, wall_ms=round((time.monotonic() - self._began) * 1000, 3), calls=self.calls
            )
        return RunResult(logs=self.logs, error=RunError(kind="died", message=message), stats=stats)
