"""The doors backends and the tool pipeline use: cheap when tracing is off.

A backend wraps each run in ``trace_run`` (see ``RunTrace``); everything else here is a
context-variable look-up unless OpenTelemetry is in use, and only then is ``_tracing``
(which imports OpenTelemetry) loaded.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping

from host.telemetry._settings import meter, tracer
from host.telemetry._state import (
    CALLS_TRACED_ELSEWHERE,
    CURRENT_TOOL_CALL,
    RuntimeFacts,
    RunTrace,
)
from runtime import RunRequest

__all__ = (
    "name_tool_call",
    "note_asked",
    "record_child_wait",
    "trace_carrier",
    "trace_run",
    "traced_by_caller",
)


def trace_run(runtime: RuntimeFacts, request: RunRequest, *, session: bool = False) -> RunTrace:
    """The trace of one run of ``runtime``, a child of the caller's current span (checked
    requests only: a caller's mistake is not a run). ``session``: a session's run."""
    found_tracer, instruments = tracer(), meter()
    if found_tracer is None and instruments is None:
        return RunTrace(request)
    from host.telemetry._tracing import TracedRun

    return TracedRun(runtime, request, found_tracer, instruments, session=session)


def name_tool_call(name: str) -> None:
    """Code mode says which tool a binding call is (``read_file`` for ``tools.read_file``)."""
    note = CURRENT_TOOL_CALL.get()
    if note is not None and note.name != name:
        note.name = name
        if note.span is not None:
            from host.telemetry._tracing import rename_tool_span

            rename_tool_span(note.span, name)


def note_asked(call_id: str | None) -> None:
    """The pipeline allowed call ``call_id`` once asked (recorded as decision ``asked``)."""
    note = CURRENT_TOOL_CALL.get()
    if note is not None and call_id is not None and note.call_id == call_id:
        note.asked = True


def record_child_wait(seconds: float, *, spare: bool) -> None:
    """A run waited ``seconds`` for its child (``spare``: one forked ahead of time)."""
    instruments = meter()
    if instruments is not None:
        instruments.child_ready(seconds, spare=spare)


def trace_carrier() -> dict[str, str]:
    """The current trace context as W3C headers (``traceparent``, ``tracestate``), for a
    backend whose runs go elsewhere; empty while tracing is off."""
    if tracer() is None:
        return {}
    from host.telemetry._tracing import inject_current

    return inject_current()


@contextlib.contextmanager
def traced_by_caller(carrier: Mapping[str, str]) -> Iterator[None]:
    """Within: runs belong to a caller elsewhere (a Ray node runs them for a ``RayRuntime``):
    their spans join the trace ``carrier`` names, and their binding calls, answered by the
    caller, are traced there (not twice). Tasks started within keep this."""
    elsewhere = CALLS_TRACED_ELSEWHERE.set(True)
    try:
        if carrier and tracer() is not None:
            from host.telemetry._tracing import attached

            with attached(carrier):
                yield
        else:
            yield
    finally:
        CALLS_TRACED_ELSEWHERE.reset(elsewhere)
