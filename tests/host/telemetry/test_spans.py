"""The doors of host.telemetry: nothing done while tracing is off, carriers, runs for a caller."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from typing import Any

import pytest
from opentelemetry.trace import StatusCode

from host.sandbox import SubprocessRuntime
from host.telemetry import (
    ATTR_ERROR_TYPE,
    RUN_SPAN,
    RunTrace,
    TelemetrySettings,
    configure,
    name_tool_call,
    note_asked,
    trace_carrier,
    trace_run,
    traced_by_caller,
)
from runtime import RunRequest, RunResult
from tests.host.telemetry.support import Recorded

pytestmark = pytest.mark.anyio


class _Facts:
    language = "python"
    isolation = "process"


async def _nothing(args: Any) -> None:
    return None


def test_with_tracing_off_a_run_is_left_as_it_came() -> None:
    previous = configure(TelemetrySettings())  # no provider here; none set globally either
    try:
        request = RunRequest(program="1", bindings={"f": _nothing})
        traced = trace_run(_Facts(), request)
        assert type(traced) is RunTrace
        with traced as same:
            assert same.request is request  # bindings not wrapped, no run id made
            same.end(RunResult(logs=[]))
        name_tool_call("f")
        note_asked("x:1")
        assert trace_carrier() == {}
    finally:
        configure(previous)


def test_a_run_imports_no_opentelemetry_until_it_is_in_use() -> None:
    # A provider can only have been set by a program that imported OpenTelemetry: until
    # then a run pays a dictionary look-up, not the import (~30 ms).
    script = textwrap.dedent(
        """
        import sys, anyio
        from host.sandbox import SubprocessRuntime
        from runtime import RunRequest

        async def f(args):
            return 1

        async def main():
            async with SubprocessRuntime(prefork=0) as rt:
                result = await rt.run(RunRequest(program="return await f()", bindings={"f": f}))
            assert result.value == 1, result
        anyio.run(main)
        print(sorted(m for m in sys.modules if m.startswith("opentelemetry")))
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=True
    )
    assert out.stdout.strip() == "[]"


def test_an_exception_through_the_block_ends_the_span_with_it(recorded: Recorded) -> None:
    with pytest.raises(KeyError), trace_run(_Facts(), RunRequest(program="1")):
        raise KeyError("lost")
    (span,) = recorded.spans()
    assert span.name == RUN_SPAN
    assert span.status.status_code is StatusCode.ERROR
    assert dict(span.attributes or {})[ATTR_ERROR_TYPE] == "KeyError"
    assert [e.name for e in span.events] == ["exception"]


def test_the_carrier_names_the_current_span(recorded: Recorded) -> None:
    tracer = recorded.tracer_provider.get_tracer("test")
    with tracer.start_as_current_span("caller") as caller:
        carrier = trace_carrier()
    context = caller.get_span_context()
    assert carrier["traceparent"].startswith(f"00-{context.trace_id:032x}-{context.span_id:016x}-")


async def test_a_run_for_a_caller_elsewhere_joins_its_trace_and_leaves_it_the_calls(
    recorded: Recorded,
) -> None:
    tracer = recorded.tracer_provider.get_tracer("caller")
    with tracer.start_as_current_span("caller's run") as remote:
        carrier = trace_carrier()
    async with SubprocessRuntime(prefork=0) as rt:
        with traced_by_caller(carrier):
            result = await rt.run(RunRequest(program="return await f()", bindings={"f": _nothing}))
    assert result.ok
    run = recorded.run()
    assert run.parent is not None and run.parent.span_id == remote.get_span_context().span_id
    assert run.parent.is_remote
    assert recorded.children(run) == []  # the caller's execute_tool span is the one


async def test_name_tool_call_and_note_asked_touch_only_their_own_call(
    recorded: Recorded,
) -> None:
    seen: dict[str, Any] = {}

    async def binding(args: Any) -> None:
        note_asked("another-run:1")  # not this call: ignored
        name_tool_call("read_file")

    async with SubprocessRuntime(prefork=0) as rt:
        await rt.run(
            RunRequest(program="await tools.read_file()", bindings={"tools.read_file": binding})
        )
    (call,) = recorded.children(recorded.run())
    seen.update(call.attributes or {})
    assert call.name == "execute_tool read_file"
    assert seen["gen_ai.tool.name"] == "read_file"
    assert seen["dsh_code.binding"] == "tools.read_file"
    assert seen["dsh_code.tool.decision"] == "allowed"
