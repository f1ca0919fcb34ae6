"""Span trees of real runs (SubprocessRuntime, code mode): calls, decisions, kills, opt-ins."""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import StatusCode

from host.codemode import CodeMode
from host.sandbox import SubprocessRuntime
from host.telemetry import (
    ATTR_BINDING,
    ATTR_DECISION,
    ATTR_ERROR_MESSAGE,
    ATTR_ERROR_TYPE,
    ATTR_KILL_REASON,
    ATTR_LIMIT_NAME,
    ATTR_LIMIT_VALUE,
    ATTR_LOGS,
    ATTR_OPERATION_NAME,
    ATTR_PROGRAM,
    ATTR_RESULT,
    ATTR_RUN_BUDGET,
    ATTR_RUN_CALLS,
    ATTR_RUN_EXCEPTION_TYPE,
    ATTR_RUN_ID,
    ATTR_RUN_LINENO,
    ATTR_RUN_OUTCOME,
    ATTR_RUN_OUTPUT_BYTES,
    ATTR_RUN_STATE_BYTES,
    ATTR_SESSION,
    ATTR_TOOL_CALL_ARGUMENTS,
    ATTR_TOOL_CALL_ID,
    ATTR_TOOL_CALL_RESULT,
    ATTR_TOOL_NAME,
    CAPTURE_FIELDS,
    EVENT_KILL,
    EVENT_LIMIT,
)
from host.tools import Ask, Deny, ToolCall, tool
from runtime import Limits, RunRequest, ToolCallError
from tests.host.telemetry.support import Recorded, span_text

pytestmark = pytest.mark.anyio

GATHERED = """
import asyncio
return await asyncio.gather(tools.meet(n=1), tools.meet(n=2), tools.meet(n=3))
"""


def _attrs(span: ReadableSpan) -> dict[str, Any]:
    return dict(span.attributes or {})


def _events(span: ReadableSpan) -> list[tuple[str, dict[str, Any]]]:
    return [(e.name, dict(e.attributes or {})) for e in span.events]


async def test_gathered_calls_are_execute_tool_spans_under_the_run_under_the_caller(
    recorded: Recorded, codemode: CodeMode
) -> None:
    arrived: list[int] = []
    everyone = anyio.Event()

    @tool(concurrency_safe=True)
    async def meet(n: int) -> int:
        """Return once three calls of meet are in flight together."""
        arrived.append(n)
        if len(arrived) == 3:
            everyone.set()
        with anyio.fail_after(30):
            await everyone.wait()
        return n

    codemode.registry.register(meet)
    in_pipeline: list[Any] = []
    codemode.registry.pre_execute(
        lambda call, decision: (
            in_pipeline.append(trace.get_current_span()) if call.name == "meet" else None
        )
    )
    tracer = recorded.tracer_provider.get_tracer("agent")

    with tracer.start_as_current_span("agent step") as step:
        result = await codemode.run(GATHERED)
    assert not result.is_error, result
    run = recorded.run()
    assert run.parent is not None and run.parent.span_id == step.get_span_context().span_id
    assert run.context is not None
    assert run.context.trace_id == step.get_span_context().trace_id
    calls = recorded.children(run)
    assert [c.name for c in calls] == ["execute_tool meet"] * 3
    run_id = _attrs(run)[ATTR_RUN_ID]
    assert sorted(_attrs(c)[ATTR_TOOL_CALL_ID] for c in calls) == [
        f"{run_id}:{n}" for n in (1, 2, 3)
    ]
    for call in calls:
        attributes = _attrs(call)
        assert attributes[ATTR_OPERATION_NAME] == "execute_tool"
        assert attributes[ATTR_TOOL_NAME] == "meet"
        assert attributes[ATTR_BINDING] == "tools.meet"
        assert attributes[ATTR_DECISION] == "allowed"
        assert ATTR_ERROR_TYPE not in attributes
        assert call.status.status_code is StatusCode.UNSET
    # gathered: the three calls were in flight together (each waited for the others)
    assert max(c.start_time or 0 for c in calls) < min(c.end_time or 0 for c in calls)
    # the pipeline's steps run inside their call's span
    call_ids = {c.context.span_id for c in calls if c.context is not None}
    assert {s.get_span_context().span_id for s in in_pipeline} == call_ids
    assert _attrs(run)[ATTR_RUN_OUTCOME] == "ok"
    assert _attrs(run)[ATTR_RUN_CALLS] == 3


async def test_a_tools_own_spans_are_children_of_its_call(
    recorded: Recorded, runtime: SubprocessRuntime
) -> None:
    tracer = recorded.tracer_provider.get_tracer("tool")

    async def fetch(args: Any) -> str:
        with tracer.start_as_current_span("http GET"):
            await anyio.sleep(0)
        return "page"

    result = await runtime.run(
        RunRequest(program="return await fetch()", bindings={"fetch": fetch})
    )
    assert result.value == "page"
    (call,) = recorded.children(recorded.run())
    assert call.name == "execute_tool fetch"
    assert [s.name for s in recorded.children(call)] == ["http GET"]


async def test_the_pipelines_decisions_denied_asked_timed_out(
    recorded: Recorded, codemode: CodeMode
) -> None:
    def policy(call: ToolCall, _decision: Any) -> Any:
        if call.name != "secret_word":
            return None
        return Deny("not that word") if call.args["word"] == "no" else Ask("say it?")

    codemode.registry.pre_execute(policy)
    codemode.registry.ask_handler = lambda call, ask: True
    program = """
out = []
for word in ("no", "yes"):
    try:
        out.append(await tools.secret_word(word=word))
    except ToolCallError as exc:
        out.append(exc.code)
try:
    await tools.slow()
except ToolCallError as exc:
    out.append(exc.code)
return out
"""
    result = await codemode.run(program)
    assert result.value is not None and result.value["result"] == ["DENIED", "yes", "TOOL_TIMEOUT"]
    run = recorded.run()
    denied, asked, timed_out = recorded.children(run)
    assert denied.name == asked.name == "execute_tool secret_word"
    assert (_attrs(denied)[ATTR_DECISION], _attrs(denied)[ATTR_ERROR_TYPE]) == ("denied", "DENIED")
    assert denied.status.status_code is StatusCode.ERROR
    assert _attrs(asked)[ATTR_DECISION] == "asked" and ATTR_ERROR_TYPE not in _attrs(asked)
    assert timed_out.name == "execute_tool slow"
    assert _attrs(timed_out)[ATTR_DECISION] == "timed_out"
    assert _attrs(timed_out)[ATTR_ERROR_TYPE] == "TOOL_TIMEOUT"
    assert _attrs(run)[ATTR_RUN_OUTCOME] == "ok"  # the program caught every failure


async def test_a_refused_ask_is_denied(recorded: Recorded, codemode: CodeMode) -> None:
    codemode.registry.pre_execute(lambda call, decision: Ask("really?"))
    codemode.registry.ask_handler = lambda call, ask: call.name == "run_code"
    await codemode.run("await tools.secret_word(word='x')")
    (call,) = recorded.children(recorded.run())
    assert _attrs(call)[ATTR_DECISION] == "denied"


async def test_a_budget_kill_is_an_error_with_its_limit_and_the_kill(
    recorded: Recorded, runtime: SubprocessRuntime
) -> None:
    result = await runtime.run(
        RunRequest(program="while True:\n    pass", limits=Limits(compute_ms=300))
    )
    assert result.error is not None and result.error.kind == "budget"
    run = recorded.run()
    attributes = _attrs(run)
    assert attributes[ATTR_RUN_OUTCOME] == attributes[ATTR_ERROR_TYPE] == "budget"
    assert attributes[ATTR_RUN_BUDGET] == "compute"
    assert run.status.status_code is StatusCode.ERROR and run.status.description == "budget"
    assert _events(run) == [
        (EVENT_LIMIT, {ATTR_LIMIT_NAME: "compute_ms", ATTR_LIMIT_VALUE: 300}),
        (EVENT_KILL, {ATTR_KILL_REASON: "budget"}),
    ]


async def test_a_wall_budget_and_an_output_cap_name_their_limits(
    recorded: Recorded, runtime: SubprocessRuntime
) -> None:
    await runtime.run(
        RunRequest(program="import time\ntime.sleep(10)", limits=Limits(max_wall_ms=300))
    )
    await runtime.run(RunRequest(program="print('x' * 5000)", limits=Limits(max_output_bytes=1000)))
    wall, output = recorded.runs()
    assert _events(wall)[0] == (
        EVENT_LIMIT,
        {ATTR_LIMIT_NAME: "max_wall_ms", ATTR_LIMIT_VALUE: 300},
    )
    assert _attrs(wall)[ATTR_RUN_BUDGET] == "wall"
    assert _events(output) == [
        (EVENT_LIMIT, {ATTR_LIMIT_NAME: "max_output_bytes", ATTR_LIMIT_VALUE: 1000}),
        (EVENT_KILL, {ATTR_KILL_REASON: "output_limit"}),
    ]


async def test_a_parse_failure_is_a_run_span_with_no_child_and_no_kill(
    recorded: Recorded, runtime: SubprocessRuntime
) -> None:
    result = await runtime.run(RunRequest(program="x = 1\ndef (:\n"))
    assert result.error is not None and result.error.kind == "parse"
    run = recorded.run()
    attributes = _attrs(run)
    assert attributes[ATTR_RUN_OUTCOME] == "parse"
    assert attributes[ATTR_RUN_LINENO] == 2
    assert attributes[ATTR_RUN_EXCEPTION_TYPE] == "SyntaxError"
    assert run.status.description == "parse: SyntaxError"
    assert recorded.children(run) == [] and _events(run) == []


async def test_an_aborted_run_says_it_was_killed(
    recorded: Recorded, runtime: SubprocessRuntime
) -> None:
    abort = anyio.Event()

    async def started(args: Any) -> None:
        abort.set()

    await runtime.run(
        RunRequest(
            program="await started()\nimport time\ntime.sleep(30)",
            bindings={"started": started},
            abort=abort,
        )
    )
    assert _events(recorded.run()) == [(EVENT_KILL, {ATTR_KILL_REASON: "aborted"})]


async def test_blocking_calls_from_threads_are_children_too(
    recorded: Recorded, runtime: SubprocessRuntime
) -> None:
    async def double(args: Any) -> int:
        return int(args["n"]) * 2

    program = (
        "from concurrent.futures import ThreadPoolExecutor\n"
        "with ThreadPoolExecutor(4) as pool:\n"
        "    return list(pool.map(lambda n: double(n=n), range(4)))"
    )
    result = await runtime.run(
        RunRequest(program=program, bindings={"double": double}, call_style="sync")
    )
    assert result.value == [0, 2, 4, 6]
    assert [c.name for c in recorded.children(recorded.run())] == ["execute_tool double"] * 4


async def test_a_failed_binding_is_its_error_code(
    recorded: Recorded, runtime: SubprocessRuntime
) -> None:
    async def refuse(args: Any) -> None:
        raise ToolCallError("refuse", "no", "GUARD_REJECTED")

    async def broken(args: Any) -> None:
        raise RuntimeError("boom")

    program = (
        "for f in (refuse, broken):\n"
        "    try:\n        await f()\n"
        "    except ToolCallError as exc:\n        print(exc.code)"
    )
    result = await runtime.run(
        RunRequest(program=program, bindings={"refuse": refuse, "broken": broken})
    )
    assert result.logs == ["GUARD_REJECTED", "TOOL_ERROR"]
    refused, failed = recorded.children(recorded.run())
    assert (_attrs(refused)[ATTR_DECISION], _attrs(refused)[ATTR_ERROR_TYPE]) == (
        "denied",
        "GUARD_REJECTED",
    )
    assert (_attrs(failed)[ATTR_DECISION], _attrs(failed)[ATTR_ERROR_TYPE]) == (
        "allowed",
        "TOOL_ERROR",
    )


async def test_a_session_run_says_so_with_its_state_size(
    recorded: Recorded, runtime: SubprocessRuntime
) -> None:
    async with runtime.session() as session:
        await session.run(RunRequest(program="x = 41"))
    await runtime.run(RunRequest(program="x = 41"))
    in_session, alone = recorded.runs()
    assert _attrs(in_session)[ATTR_SESSION] is True
    assert _attrs(in_session)[ATTR_RUN_STATE_BYTES] > 0
    assert _attrs(alone)[ATTR_SESSION] is False
    assert _attrs(alone)[ATTR_RUN_STATE_BYTES] == 0


SECRET = "hunter2-secret"
LEAKY = f"""
print("the password is {SECRET}")
word = await tools.secret_word(word="{SECRET}")
return {{"word": word}}
"""


async def test_nothing_that_may_hold_secrets_is_recorded_by_default(
    recorded: Recorded, codemode: CodeMode
) -> None:
    await codemode.run(LEAKY)
    await codemode.run(f"raise ValueError('{SECRET}')")
    spans = recorded.spans()
    assert len(recorded.runs()) == 2
    assert all(SECRET not in span_text(s) for s in spans)
    opted = {ATTR_PROGRAM, ATTR_LOGS, ATTR_RESULT, ATTR_ERROR_MESSAGE}
    opted |= {ATTR_TOOL_CALL_ARGUMENTS, ATTR_TOOL_CALL_RESULT}
    assert all(not opted & set(_attrs(s)) for s in spans)
    failed = recorded.runs()[1]
    assert failed.status.description == "exception: ValueError"


async def test_what_the_caller_opts_in_to_is_recorded_and_bounded(
    runtime: SubprocessRuntime, codemode: CodeMode
) -> None:
    with Recorded(capture=CAPTURE_FIELDS) as recorded:
        await codemode.run(LEAKY)
        await codemode.run(f"raise ValueError('{SECRET}')")
    ok, failed = recorded.runs()
    attributes = _attrs(ok)
    assert attributes[ATTR_PROGRAM] == LEAKY
    assert attributes[ATTR_LOGS] == f"the password is {SECRET}"
    assert attributes[ATTR_RESULT] == f'{{"word":"{SECRET}"}}'
    (call,) = recorded.children(ok)
    assert _attrs(call)[ATTR_TOOL_CALL_ARGUMENTS] == f'{{"word":"{SECRET}"}}'
    assert _attrs(call)[ATTR_TOOL_CALL_RESULT] == f'"{SECRET}"'
    assert SECRET in _attrs(failed)[ATTR_ERROR_MESSAGE]
    with Recorded(capture=CAPTURE_FIELDS, max_captured_chars=16) as cut:
        await codemode.run(LEAKY)
    program = _attrs(cut.run())[ATTR_PROGRAM]
    assert program == f"{LEAKY[:16]}... [cut: {len(LEAKY)} characters]"


async def test_output_bytes_count_the_logs_and_the_result(
    recorded: Recorded, runtime: SubprocessRuntime
) -> None:
    await runtime.run(RunRequest(program="print('héllo')\nprint('x')\nreturn [1, 2]"))
    # "héllo\n" is 7 bytes, "x\n" 2, "[1,2]" 5
    assert _attrs(recorded.run())[ATTR_RUN_OUTPUT_BYTES] == 14


async def test_what_the_child_forges_is_never_a_span_and_its_text_is_bounded(
    recorded: Recorded, runtime: SubprocessRuntime
) -> None:
    from tests.host.sandbox.hostile import bridge_helpers

    async def echo(args: Any) -> Any:
        return args

    names = ["tools.echo ", "tools", "x" * 100_000]
    program = bridge_helpers() + (
        f"for i, name in enumerate({names!r}):\n"
        "    send({'type': 'Call', 'id': 10_000 + i, 'name': name, 'args': {}})\n"
        "import asyncio\nawait asyncio.sleep(0.2)\n"
        "send({'type': 'Failed', 'kind': 'exception', 'message': 'm', "
        "'exception_type': 'E' * 100_000})\n"
        "import time\ntime.sleep(5)\n"
    )
    result = await runtime.run(
        RunRequest(program=program, bindings={"tools.echo": echo}, limits=Limits(max_wall_ms=4_000))
    )
    assert result.error is not None and result.error.kind == "exception"
    run = recorded.run()
    assert recorded.children(run) == []  # names that are no binding: answered, never traced
    assert _attrs(run)[ATTR_RUN_CALLS] == len(names)
    assert _attrs(run)[ATTR_RUN_EXCEPTION_TYPE] == "E" * 200 + "... [cut: 100000 characters]"
    assert len(run.status.description or "") < 300
