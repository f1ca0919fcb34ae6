"""The spans themselves (loaded only once OpenTelemetry is in use): a run's, its calls'.

Every attribute comes from the host: the request, the runtime, the result the backend
settled on. What the child said reaches a span only as numbers or as bounded text (the
binding names are the caller's own keys; a name the child made up is never a span).
"""

from __future__ import annotations

import functools
import secrets
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import msgspec
from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.propagate import extract, inject
from opentelemetry.trace import Span, Status, StatusCode, Tracer

from host.telemetry._metrics import Instruments
from host.telemetry._names import (
    ATTR_BINDING,
    ATTR_CALL_STYLE,
    ATTR_DECISION,
    ATTR_ERROR_MESSAGE,
    ATTR_ERROR_TYPE,
    ATTR_ISOLATION,
    ATTR_KILL_REASON,
    ATTR_LANGUAGE,
    ATTR_LIMIT_NAME,
    ATTR_LIMIT_VALUE,
    ATTR_LIMITS_COMPUTE_MS,
    ATTR_LIMITS_MAX_HEAP_MB,
    ATTR_LIMITS_MAX_OUTPUT_BYTES,
    ATTR_LIMITS_MAX_PARALLEL_SUB_CALLS,
    ATTR_LIMITS_MAX_WALL_MS,
    ATTR_LOGS,
    ATTR_OPERATION_NAME,
    ATTR_POLICY,
    ATTR_PROGRAM,
    ATTR_RESULT,
    ATTR_RUN_BUDGET,
    ATTR_RUN_CALLS,
    ATTR_RUN_COMPUTE_MS,
    ATTR_RUN_DROPPED_FRAMES,
    ATTR_RUN_EXCEPTION_TYPE,
    ATTR_RUN_EXIT_STATUS,
    ATTR_RUN_ID,
    ATTR_RUN_LINENO,
    ATTR_RUN_NODE,
    ATTR_RUN_OUTCOME,
    ATTR_RUN_OUTPUT_BYTES,
    ATTR_RUN_STATE_BYTES,
    ATTR_RUN_WALL_MS,
    ATTR_SESSION,
    ATTR_TOOL_CALL_ARGUMENTS,
    ATTR_TOOL_CALL_ID,
    ATTR_TOOL_CALL_RESULT,
    ATTR_TOOL_NAME,
    EVENT_KILL,
    EVENT_LIMIT,
    OPERATION_EXECUTE_TOOL,
    RUN_SPAN,
    TOOL_SPAN,
)
from host.telemetry._settings import current_settings
from host.telemetry._state import (
    CALLS_TRACED_ELSEWHERE,
    CURRENT_TOOL_CALL,
    RuntimeFacts,
    RunTrace,
    ToolCallNote,
)
from runtime import Binding, RunError, RunRequest, RunResult, current_call

__all__ = ("TracedRun", "attached", "inject_current", "rename_tool_span")

#: The most characters of text the child chose (an exception's type name) on a span.
_CHILD_TEXT = 200
#: Failure kinds that end with the host killing the run's processes.
_KILLED = frozenset({"budget", "memory", "output_limit", "aborted"})
#: Error codes that are a policy's refusal.
_DENIED = frozenset({"DENIED", "GUARD_REJECTED"})
_encoder = msgspec.json.Encoder()


def bounded(text: str, limit: int) -> str:
    """``text``, cut to ``limit`` characters with a note of its length when longer."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}... [cut: {len(text)} characters]"


def _json_text(value: Any, limit: int) -> str:
    try:
        text = _encoder.encode(value).decode()
    except (TypeError, ValueError, OverflowError):
        text = f"<not JSON: {type(value).__name__}>"
    return bounded(text, limit)


def _output_bytes(result: RunResult) -> int:
    """Log bytes (UTF-8, a newline each) plus the result's JSON bytes."""
    total = len(result.logs)
    for line in result.logs:
        total += len(line) if line.isascii() else len(line.encode("utf-8", "surrogatepass"))
    if result.has_value:
        try:
            total += len(_encoder.encode(result.value))
        except (TypeError, ValueError, OverflowError):
            pass
    return total


def _limit_passed(error: RunError, request: RunRequest) -> tuple[str, int | None] | None:
    """The limit a failure is the crossing of (its name, and its value when a ``Limits``'s)."""
    limits = request.limits
    if error.kind == "budget":
        if error.budget == "wall":
            return "max_wall_ms", limits.max_wall_ms
        return "compute_ms", limits.compute_ms
    if error.kind == "memory":
        return "max_heap_mb", limits.max_heap_mb
    if error.kind == "output_limit":
        for other in ("max_json_values", "max_log_lines"):
            if other in error.message:
                return other, None
        return "max_output_bytes", limits.max_output_bytes
    if error.kind == "state" and "max_state_bytes" in error.message:
        return "max_state_bytes", None
    return None


class TracedRun(RunTrace):
    """A run's span (when a tracer is set) and metrics (when a meter is), made in the host."""

    __slots__ = (
        "_capture",
        "_ended",
        "_instruments",
        "_max_chars",
        "_runtime",
        "_span",
        "_started",
        "_token",
        "context",
        "tracer",
    )

    def __init__(
        self,
        runtime: RuntimeFacts,
        request: RunRequest,
        tracer: Tracer | None,
        instruments: Instruments | None,
        *,
        session: bool,
    ) -> None:
        settings = current_settings()
        self._capture = settings.capture
        self._max_chars = settings.max_captured_chars
        self._runtime = runtime
        self._instruments = instruments
        self.tracer = tracer
        self._started = time.perf_counter()
        self._ended = False
        self._token: object | None = None
        run_id = request.run_id or secrets.token_hex(8)
        self.context = otel_context.get_current()
        self._span: Span | None = None
        if tracer is not None:
            limits = request.limits
            attributes: dict[str, Any] = {
                ATTR_RUN_ID: run_id,
                ATTR_LANGUAGE: runtime.language,
                ATTR_POLICY: request.policy,
                ATTR_CALL_STYLE: request.call_style,
                ATTR_SESSION: session,
                ATTR_LIMITS_COMPUTE_MS: limits.compute_ms,
                ATTR_LIMITS_MAX_WALL_MS: limits.max_wall_ms,
                ATTR_LIMITS_MAX_OUTPUT_BYTES: limits.max_output_bytes,
                ATTR_LIMITS_MAX_HEAP_MB: limits.max_heap_mb,
                ATTR_LIMITS_MAX_PARALLEL_SUB_CALLS: limits.max_parallel_sub_calls,
            }
            if "program" in self._capture:
                attributes[ATTR_PROGRAM] = bounded(request.program, self._max_chars)
            self._span = tracer.start_span(RUN_SPAN, context=self.context, attributes=attributes)
            self.context = trace.set_span_in_context(self._span, self.context)
        bindings: Mapping[str, Binding] = request.bindings
        if bindings and not CALLS_TRACED_ELSEWHERE.get():
            bindings = _TracedBindings(self, bindings)
        super().__init__(msgspec.structs.replace(request, run_id=run_id, bindings=bindings))

    def __enter__(self) -> TracedRun:
        if self._span is not None:
            self._token = otel_context.attach(self.context)
        return self

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        if self._token is not None:
            otel_context.detach(self._token)  # type: ignore[arg-type]
            self._token = None
        if self._ended:
            return
        self._ended = True
        if self._span is not None:
            if isinstance(exc, BaseException):
                self._span.record_exception(exc)
                self._span.set_attribute(ATTR_ERROR_TYPE, type(exc).__qualname__)
                self._span.set_status(Status(StatusCode.ERROR, type(exc).__qualname__))
            self._span.end()

    def end(self, result: RunResult) -> None:
        """Record the outcome, the figures and what the caller opted in to; end the span."""
        if self._ended:
            return
        self._ended = True
        error, stats = result.error, result.stats
        outcome = "ok" if error is None else error.kind
        isolation = stats.isolation if stats is not None else self._runtime.isolation
        if self._span is not None:
            self._end_span(result, outcome, isolation)
        if self._instruments is not None:
            labels = {
                ATTR_LANGUAGE: self._runtime.language,
                ATTR_ISOLATION: isolation,
                ATTR_RUN_OUTCOME: outcome,
            }
            compute = stats.compute_ms / 1000 if stats is not None else None
            self._instruments.run_finished(labels, time.perf_counter() - self._started, compute)

    def _end_span(self, result: RunResult, outcome: str, isolation: str) -> None:
        span = self._span
        assert span is not None
        error, stats = result.error, result.stats
        attributes: dict[str, Any] = {
            ATTR_RUN_OUTCOME: outcome,
            ATTR_ISOLATION: isolation,
            ATTR_RUN_OUTPUT_BYTES: _output_bytes(result),
        }
        if stats is not None:
            attributes[ATTR_RUN_COMPUTE_MS] = stats.compute_ms
            attributes[ATTR_RUN_WALL_MS] = stats.wall_ms
            attributes[ATTR_RUN_CALLS] = stats.calls
            attributes[ATTR_RUN_STATE_BYTES] = stats.state_bytes
            attributes[ATTR_RUN_DROPPED_FRAMES] = stats.dropped_frames
            if stats.node is not None:
                attributes[ATTR_RUN_NODE] = bounded(stats.node, _CHILD_TEXT)
        capture, limit = self._capture, self._max_chars
        if "logs" in capture:
            attributes[ATTR_LOGS] = bounded("\n".join(result.logs), limit)
        if "result" in capture and result.has_value:
            attributes[ATTR_RESULT] = _json_text(result.value, limit)
        if error is not None:
            attributes[ATTR_ERROR_TYPE] = error.kind
            for name, value in (
                (ATTR_RUN_BUDGET, error.budget),
                (ATTR_RUN_EXIT_STATUS, error.exit_status),
                (ATTR_RUN_LINENO, error.lineno),
            ):
                if value is not None:
                    attributes[name] = value
            description: str = error.kind
            if error.exception_type is not None:
                exception_type = bounded(error.exception_type, _CHILD_TEXT)
                attributes[ATTR_RUN_EXCEPTION_TYPE] = exception_type
                description = f"{error.kind}: {exception_type}"
            if "result" in capture:
                attributes[ATTR_ERROR_MESSAGE] = bounded(error.message, limit)
            self._events(span, error, stats is not None and stats.wall_ms > 0)
            span.set_status(Status(StatusCode.ERROR, description))
        span.set_attributes(attributes)
        span.end()

    def _events(self, span: Span, error: RunError, child_ran: bool) -> None:
        passed = _limit_passed(error, self.request)
        if passed is not None:
            name, value = passed
            event: dict[str, Any] = {ATTR_LIMIT_NAME: name}
            if value is not None:
                event[ATTR_LIMIT_VALUE] = value
            span.add_event(EVENT_LIMIT, event)
        if error.kind in _KILLED and child_ran:
            span.add_event(EVENT_KILL, {ATTR_KILL_REASON: error.kind})

    def tool_span(self, name: str, note: ToolCallNote, args: Any) -> Span:
        """A started ``execute_tool`` span for one binding call, child of the run's."""
        assert self.tracer is not None
        attributes: dict[str, Any] = {
            ATTR_OPERATION_NAME: OPERATION_EXECUTE_TOOL,
            ATTR_TOOL_NAME: name,
            ATTR_BINDING: name,
        }
        if note.call_id is not None:
            attributes[ATTR_TOOL_CALL_ID] = note.call_id
        if "tool_arguments" in self._capture:
            attributes[ATTR_TOOL_CALL_ARGUMENTS] = _json_text(args, self._max_chars)
        return self.tracer.start_span(
            TOOL_SPAN.format(name), context=self.context, attributes=attributes
        )

    def tool_finished(
        self,
        note: ToolCallNote,
        span: Span | None,
        error_type: str | None,
        outcome: tuple[bool, Any],
        seconds: float,
    ) -> None:
        """End a binding call's span and count it: ``outcome`` is (failed, value or message)."""
        if error_type in _DENIED:
            decision = "denied"
        elif error_type == "TOOL_TIMEOUT":
            decision = "timed_out"
        else:
            decision = "asked" if note.asked else "allowed"
        if span is not None:
            attributes: dict[str, Any] = {ATTR_DECISION: decision}
            failed, value = outcome
            if "tool_results" in self._capture:
                attributes[ATTR_TOOL_CALL_RESULT] = (
                    bounded(str(value), self._max_chars)
                    if failed
                    else _json_text(value, self._max_chars)
                )
            if error_type is not None:
                attributes[ATTR_ERROR_TYPE] = error_type
                span.set_status(Status(StatusCode.ERROR, error_type))
            span.set_attributes(attributes)
            span.end()
        if self._instruments is not None:
            labels = {ATTR_TOOL_NAME: note.name, ATTR_DECISION: decision}
            if error_type is not None:
                labels[ATTR_ERROR_TYPE] = error_type
            self._instruments.tool_call_finished(labels, seconds)


async def _traced_call(run: TracedRun, name: str, binding: Binding, args: Any) -> Any:
    """One binding call in its ``execute_tool`` span (current while the binding runs)."""
    info = current_call.get()
    note = ToolCallNote(name, info.call_id if info is not None else None)
    token = None
    if run.tracer is not None:
        note.span = run.tool_span(name, note, args)
        token = otel_context.attach(trace.set_span_in_context(note.span, run.context))
    noted = CURRENT_TOOL_CALL.set(note)
    started = time.perf_counter()
    error_type: str | None = None
    outcome: tuple[bool, Any] = (True, "")
    try:
        value = await binding(args)
        outcome = (False, value)
        return value
    except Exception as exc:
        code = getattr(exc, "code", None)
        error_type = code if isinstance(code, str) else "TOOL_ERROR"
        outcome = (True, getattr(exc, "message", None) or exc)
        raise
    except BaseException as exc:  # cancelled: the run settled, or its caller went away
        error_type = type(exc).__qualname__
        raise
    finally:
        CURRENT_TOOL_CALL.reset(noted)
        if token is not None:
            otel_context.detach(token)
        run.tool_finished(note, note.span, error_type, outcome, time.perf_counter() - started)


class _TracedBindings(Mapping[str, Binding]):
    """A run's bindings, each traced (wrapped when first looked up)."""

    def __init__(self, run: TracedRun, bindings: Mapping[str, Binding]) -> None:
        self._run = run
        self._inner = bindings
        self._made: dict[str, Binding] = {}

    def __getitem__(self, name: str) -> Binding:
        made = self._made.get(name)
        if made is None:
            made = functools.partial(_traced_call, self._run, name, self._inner[name])
            self._made[name] = made
        return made

    def __iter__(self) -> Iterator[str]:
        return iter(self._inner)

    def __len__(self) -> int:
        return len(self._inner)


def rename_tool_span(span: Span, name: str) -> None:
    """Name a call's span after its tool (code mode knows it; the runtime knows the binding)."""
    span.update_name(TOOL_SPAN.format(name))
    span.set_attribute(ATTR_TOOL_NAME, name)


def inject_current() -> dict[str, str]:
    """The current context as W3C trace-context headers."""
    carrier: dict[str, str] = {}
    inject(carrier)
    return carrier


@contextmanager
def attached(carrier: Mapping[str, str]) -> Iterator[None]:
    """Within: the context ``carrier`` names is the current one."""
    token = otel_context.attach(extract(dict(carrier)))
    try:
        yield
    finally:
        otel_context.detach(token)
