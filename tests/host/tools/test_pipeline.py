"""The invocation pipeline: stage order, rejections, wrappers, post-execute, finalize."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from host.tools import (
    AbortController,
    AbortSignal,
    Allow,
    Ask,
    Deny,
    ErrorCode,
    PostDecision,
    Scope,
    ToolCall,
    ToolDefinition,
    ToolError,
    ToolRegistry,
    ToolResult,
    ToolResultEvent,
    ToolRunContext,
    ToolsConfig,
    _pipeline,
    define_tool,
    freeze,
    schema,
    tool,
)
from host.tools._hooks import Events, Hooks
from host.tools._pipeline import Invocation

from .helpers import QUIET, echo, traced_registry

pytestmark = pytest.mark.anyio


async def test_stages_run_in_order() -> None:
    trace: list[str] = []
    registry = traced_registry(trace)
    result = await registry.invoke("t", {"text": "hi"}, call_id="c1")
    assert result.to_dict() == {
        "is_error": False,
        "value": "hi",
        "content": [{"type": "text", "text": "hi"}],
    }
    assert trace == ["pre", "guard", "wrap>", "body", "<wrap", "post", "finalize", "result"]


async def test_unknown_tool_is_a_result_not_an_exception() -> None:
    registry = ToolRegistry(QUIET)
    events: list[ToolResultEvent] = []
    registry.on("result", events.append)
    result = await registry.invoke("missing", {})
    assert result.code is ErrorCode.UNKNOWN_TOOL
    assert result.error is not None
    assert "missing" in result.error.message
    assert len(events) == 1


async def test_invalid_args_reach_post_execute_but_not_the_body() -> None:
    trace: list[str] = []
    registry = traced_registry(trace)
    result = await registry.invoke("t", {"text": 3})
    assert result.code is ErrorCode.INVALID_ARGS
    assert result.error is not None
    assert result.error.message == "invalid arguments for t: $.text: expected string, got integer 3"
    assert trace == ["post", "finalize", "result"]


async def test_denied_calls_reach_post_execute() -> None:
    trace: list[str] = []
    registry = traced_registry(trace)
    registry.pre_execute(lambda call, decision: Deny("not today"))
    result = await registry.invoke("t", {"text": "x"})
    assert result.code is ErrorCode.DENIED
    assert result.error is not None
    assert "not today" in result.error.message
    assert trace == ["pre", "post", "finalize", "result"]


async def test_pre_execute_is_a_waterfall() -> None:
    registry = ToolRegistry(QUIET)
    registry.register(echo())
    seen: list[Any] = []

    def first(call: ToolCall, decision: Any) -> Any:
        seen.append(decision)
        return Deny("first")

    def second(call: ToolCall, decision: Any) -> Any:
        seen.append(decision)
        return Allow()

    async def third(call: ToolCall, decision: Any) -> Any:
        seen.append(decision)
        return None

    registry.pre_execute(second, order=2)
    registry.pre_execute(third, order=3)
    registry.pre_execute(first, order=1)
    result = await registry.invoke("echo", {"text": "x"})
    assert not result.is_error
    assert seen == [Allow(), Deny("first"), Allow()]


async def test_ask_without_a_handler_is_denied() -> None:
    registry = ToolRegistry(QUIET)
    registry.register(echo())
    registry.pre_execute(lambda call, decision: Ask("run echo?"))
    result = await registry.invoke("echo", {"text": "x"})
    assert result.code is ErrorCode.DENIED
    assert result.error is not None
    assert "no ask handler" in result.error.message


@pytest.mark.parametrize(("answer", "ok"), [(True, True), (False, False), ("yes", False)])
async def test_ask_goes_to_the_host_handler(answer: Any, ok: bool) -> None:
    asked: list[str] = []

    async def handler(call: ToolCall, ask: Ask) -> Any:
        asked.append(ask.prompt)
        return answer

    registry = ToolRegistry(QUIET, ask_handler=handler)
    registry.register(echo())
    registry.pre_execute(lambda call, decision: Ask("run echo?"))
    result = await registry.invoke("echo", {"text": "x"})
    assert result.is_error is not ok
    assert asked == ["run echo?"]


async def test_an_ask_handler_may_deny_with_its_reason() -> None:
    def nobody(call: ToolCall, ask: Ask) -> Deny:
        return Deny(f"nobody can answer {ask.prompt!r}")

    registry = ToolRegistry(QUIET, ask_handler=nobody)
    registry.register(echo())
    registry.pre_execute(lambda call, decision: Ask("run echo?"))
    result = await registry.invoke("echo", {"text": "x"})
    assert result.code is ErrorCode.DENIED and result.error is not None
    assert result.error.message == "tool call echo denied: nobody can answer 'run echo?'"


async def test_failing_pre_execute_hook_denies() -> None:
    registry = ToolRegistry(QUIET)
    registry.register(echo())

    def broken(call: ToolCall, decision: Any) -> Any:
        raise RuntimeError("boom")

    registry.pre_execute(broken)
    result = await registry.invoke("echo", {"text": "x"})
    assert result.code is ErrorCode.DENIED
    assert result.error is not None
    assert "boom" in result.error.message


async def test_guard_rejection_is_monotonic() -> None:
    trace: list[str] = []
    registry = traced_registry(trace)
    registry.pre_execute(lambda call, decision: Allow(), order=99)
    registry.guard(lambda call: "too risky")
    registry.guard(lambda call: trace.append("second guard"))
    registry.post_execute(lambda call, result: PostDecision(value="forged"))
    result = await registry.invoke("t", {"text": "x"})
    assert result.code is ErrorCode.GUARD_REJECTED
    assert result.error is not None
    assert result.error.message == "too risky"
    assert "body" not in trace
    assert "second guard" not in trace


@pytest.mark.parametrize("kind", ["raises", "async"])
async def test_broken_guards_reject(kind: str) -> None:
    registry = ToolRegistry(QUIET)
    registry.register(echo())

    def raising(call: ToolCall) -> str | None:
        raise RuntimeError("guard bug")

    async def asynchronous(call: ToolCall) -> str | None:
        return None

    registry.guard(raising if kind == "raises" else asynchronous)  # type: ignore[arg-type]
    result = await registry.invoke("echo", {"text": "x"})
    assert result.code is ErrorCode.GUARD_REJECTED


async def test_wrapper_sees_the_replaced_signal_inside() -> None:
    registry = ToolRegistry(QUIET)
    registry.register(echo())
    inner_signals: list[AbortSignal] = []
    replacement = AbortController()

    async def outer(call: ToolCall, next_: Any) -> ToolResult:
        result: ToolResult = await next_(replacement.signal)
        return result

    async def inner(call: ToolCall, next_: Any) -> ToolResult:
        inner_signals.append(call.signal)
        result: ToolResult = await next_()
        return result

    registry.wrap_execute(outer, order=1)
    registry.wrap_execute(inner, order=2)
    await registry.invoke("echo", {"text": "x"})
    assert inner_signals == [replacement.signal]


async def test_wrapper_failure_is_a_tool_error() -> None:
    registry = ToolRegistry(QUIET)
    registry.register(echo())

    async def broken(call: ToolCall, next_: Any) -> ToolResult:
        raise RuntimeError("wrapper bug")

    async def wrong_type(call: ToolCall, next_: Any) -> Any:
        return "not a result"

    dispose = registry.wrap_execute(broken)
    result = await registry.invoke("echo", {"text": "x"})
    assert result.code is ErrorCode.TOOL_ERROR
    assert result.error is not None
    assert result.error.name == "ToolWrapperError"
    dispose()
    registry.wrap_execute(wrong_type)
    assert (await registry.invoke("echo", {"text": "x"})).code is ErrorCode.TOOL_ERROR


async def test_tool_failure_and_invalid_output() -> None:
    registry = ToolRegistry(QUIET)

    def fails(args: Any, ctx: ToolRunContext) -> Any:
        raise ValueError("disk on fire")

    def wrong(args: Any, ctx: ToolRunContext) -> Any:
        return {"n": "x"}

    out = {"schema": schema.object({"n": schema.integer()}, additional_properties=False)}
    registry.register(define_tool(name="f", description="", parameters={}, execute=fails))
    registry.register(
        define_tool(name="w", description="", parameters={}, execute=wrong, output=out)
    )
    failed = await registry.invoke("f", {})
    assert failed.to_dict()["error"] == {
        "message": "ValueError: disk on fire",
        "info": {"name": "ValueError", "code": "TOOL_ERROR"},  # a builtin type keeps its name
    }
    invalid = await registry.invoke("w", {})
    assert invalid.code is ErrorCode.OUTPUT_INVALID
    assert invalid.error is not None
    assert "$.n: expected integer" in invalid.error.message


async def test_non_json_output_without_schema_is_invalid() -> None:
    registry = ToolRegistry(QUIET)
    registry.register(
        define_tool(name="s", description="", parameters={}, execute=lambda a, c: {1, 2})
    )
    assert (await registry.invoke("s", {})).code is ErrorCode.OUTPUT_INVALID


async def test_output_is_frozen_rendered_and_presentation_meta_persisted() -> None:
    registry = ToolRegistry(QUIET)
    produced: list[Any] = []

    def run(args: Any, ctx: ToolRunContext) -> Any:
        value = {"lines": ["a", "b"]}
        produced.append(value)
        return value

    registry.register(
        define_tool(
            name="r",
            description="",
            parameters={},
            execute=run,
            output={
                "schema": schema.object(
                    {"lines": schema.array(schema.string())}, additional_properties=False
                ),
                "render": lambda args, value: "\n".join(value["lines"]),
                "presentation_meta": lambda args, value: {"count": len(value["lines"])},
            },
        )
    )
    result = await registry.invoke("r", {})
    produced[0]["lines"].append("c")
    assert result.to_dict() == {
        "is_error": False,
        "value": {"lines": ["a", "b"]},
        "content": [{"type": "text", "text": "a\nb"}],
        "meta": {"presentation": {"count": 2}},
    }
    with pytest.raises(TypeError):
        result.value["lines"].append("d")


async def test_render_failure_is_a_tool_error() -> None:
    registry = ToolRegistry(QUIET)
    registry.register(
        define_tool(
            name="r",
            description="",
            parameters={},
            execute=lambda a, c: 1,
            output={"schema": schema.integer(), "render": lambda a, v: 42},
        )
    )
    result = await registry.invoke("r", {})
    assert result.code is ErrorCode.TOOL_ERROR


async def test_post_execute_replaces_blocks_and_attaches_contexts_in_order() -> None:
    registry = ToolRegistry(QUIET)
    registry.register(echo())
    registry.post_execute(
        lambda call, result: PostDecision(value="new", additional_contexts=("one",)), order=1
    )

    async def second(call: ToolCall, result: ToolResult) -> PostDecision:
        assert result.value == "new"
        return PostDecision(content="shown", additional_contexts=("two", "three"))

    registry.post_execute(second, order=2)
    result = await registry.invoke("echo", {"text": "x"})
    assert result.value == "new"
    assert result.to_dict()["content"] == [{"type": "text", "text": "shown"}]
    texts = [c["content"][0]["text"] for c in result.to_dict()["additional_contexts"]]
    assert texts == ["one", "two", "three"]


async def test_post_execute_value_replacement_is_rerendered_and_validated() -> None:
    registry = ToolRegistry(QUIET)
    registry.register(echo())
    dispose = registry.post_execute(lambda call, result: PostDecision(value="v2"))
    result = await registry.invoke("echo", {"text": "x"})
    assert result.to_dict()["content"] == [{"type": "text", "text": "v2"}]
    dispose()
    registry.post_execute(lambda call, result: PostDecision(value=3))
    assert (await registry.invoke("echo", {"text": "x"})).code is ErrorCode.OUTPUT_INVALID


async def test_post_execute_block_and_failure() -> None:
    registry = ToolRegistry(QUIET)
    registry.register(echo())
    dispose = registry.post_execute(lambda call, result: PostDecision(block="secret"))
    blocked = await registry.invoke("echo", {"text": "x"})
    assert blocked.code is ErrorCode.DENIED
    assert blocked.error is not None
    assert blocked.error.name == "ToolBlockedError"
    dispose()

    def broken(call: ToolCall, result: ToolResult) -> Any:
        raise RuntimeError("post bug")

    registry.post_execute(broken)
    failed = await registry.invoke("echo", {"text": "x"})
    assert failed.code is ErrorCode.TOOL_ERROR


@pytest.mark.parametrize(
    "case", ["success", "tool_error", "invalid_args", "denied", "pre_aborted", "timeout"]
)
async def test_finalize_content_runs_exactly_once(case: str) -> None:
    registry = ToolRegistry(ToolsConfig(repeat_reminder=None))
    calls: list[ToolResult] = []

    def finalize(result: ToolResult) -> Any:
        calls.append(result)
        return "final:" + ("error" if result.is_error else "ok")

    async def run(args: Any, ctx: ToolRunContext) -> Any:
        if case == "tool_error":
            raise RuntimeError("x")
        if case == "timeout":
            await anyio.sleep(5)
        return 1

    registry.register(
        define_tool(
            name="f",
            description="",
            parameters={"n": schema.integer()},
            execute=run,
            finalize_content=finalize,
            timeout_ms=20 if case == "timeout" else None,
        )
    )
    if case == "denied":
        registry.pre_execute(lambda call, decision: Deny("no"))
    controller = AbortController()
    if case == "pre_aborted":
        controller.abort()
    args = {"n": "bad"} if case == "invalid_args" else {}
    result = await registry.invoke("f", args, signal=controller.signal)
    assert len(calls) == 1
    assert result.content[0]["text"] == ("final:ok" if case == "success" else "final:error")


@pytest.mark.parametrize("kind", ["raises", "async"])
async def test_broken_finalize_content_becomes_an_error_once(kind: str) -> None:
    registry = ToolRegistry(QUIET)
    calls: list[int] = []

    def raising(result: ToolResult) -> Any:
        calls.append(1)
        raise RuntimeError("finalize bug")

    async def asynchronous(result: ToolResult) -> Any:
        calls.append(1)
        return "x"

    registry.register(echo(finalize_content=raising if kind == "raises" else asynchronous))
    result = await registry.invoke("echo", {"text": "x"})
    assert result.code is ErrorCode.TOOL_ERROR
    assert calls == ([1] if kind == "raises" else [])  # a coroutine is closed, never run


async def test_result_event_sees_the_frozen_final_result() -> None:
    registry = ToolRegistry(QUIET)
    registry.register(echo(finalize_content=lambda result: "final"))
    events: list[ToolResultEvent] = []
    registry.on("result", events.append)
    result = await registry.invoke("echo", {"text": "x"}, call_id="id-7")
    assert events[0].result is result
    assert events[0].call.call_id == "id-7"
    with pytest.raises(TypeError):
        events[0].result.content.append({"type": "text", "text": "forged"})


async def test_decorated_tool_gets_its_run_context() -> None:
    seen: list[ToolRunContext] = []

    @tool
    async def probe(x: int, *, ctx: ToolRunContext | None = None) -> int:
        assert ctx is not None
        seen.append(ctx)
        return x * 2

    @tool
    def blocking(x: int) -> int:
        return x + 1

    registry = ToolRegistry(QUIET)
    registry.register(probe)
    registry.register(blocking)
    assert (await registry.invoke("probe", {"x": 2}, call_id="p")).value == 4
    assert seen[0].call_id == "p"
    assert seen[0].name == "probe"
    assert (await registry.invoke("blocking", {"x": 2})).value == 3
    unexpected = await registry.invoke("blocking", {"x": 2, "y": 1})
    assert unexpected.code is ErrorCode.INVALID_ARGS


async def test_bare_tools_own_their_argument_validation() -> None:
    registry = ToolRegistry(QUIET)
    registry.register(
        define_tool(
            name="bare",
            description="",
            parameters={"n": schema.integer(required=True)},
            execute=lambda args, ctx: "got " + str(args),
            validate_args=False,
        )
    )
    result = await registry.invoke("bare", {"n": "text"})
    assert result.value == "got {'n': 'text'}"


async def test_odd_names_are_unknown_tools() -> None:
    registry = ToolRegistry(QUIET)
    for name in (["a"], None, 3):
        result = await registry.invoke(name, {})  # type: ignore[arg-type]
        assert result.code is ErrorCode.UNKNOWN_TOOL


def _nested(depth: int, leaf: Any) -> Any:
    value = leaf
    for index in range(depth):
        value = [value] if index % 2 else {"k": value}
    return value


async def test_a_100000_level_argument_passes_the_whole_pipeline() -> None:
    registry = ToolRegistry()  # with the guard plugins: the reminder normalizes the arguments
    registry.register(
        define_tool(
            name="deep",
            description="",
            parameters={"tree": schema.json(required=True)},
            execute=lambda args, ctx: args["tree"],
        )
    )
    ok = await registry.invoke("deep", {"tree": _nested(100_000, 1)})
    assert not ok.is_error
    assert ok.to_dict()["value"][0]["k"][0]["k"] is not None
    bad = await registry.invoke("deep", {"tree": _nested(100_000, (1, 2))})
    assert bad.code is ErrorCode.INVALID_ARGS
    assert bad.error is not None
    assert bad.error.message.endswith("expected a JSON value, got a non-JSON tuple")


async def test_a_raised_exception_is_named_by_its_nearest_builtin_type() -> None:
    import json

    class QuotaGone(Exception):
        pass

    registry = ToolRegistry(QUIET)

    def parse(args: Any, ctx: ToolRunContext) -> Any:
        return json.loads("{")

    def own(args: Any, ctx: ToolRunContext) -> Any:
        raise QuotaGone("no more")

    registry.register(define_tool(name="p", description="", parameters={}, execute=parse))
    registry.register(define_tool(name="o", description="", parameters={}, execute=own))
    parsed = (await registry.invoke("p", {})).error
    assert parsed is not None
    assert parsed.name == "ValueError"  # JSONDecodeError is a ValueError: code mode raises one
    assert parsed.message.startswith("JSONDecodeError: ")
    owned = (await registry.invoke("o", {})).error
    assert owned is not None
    assert (owned.name, owned.message) == ("ToolExecutionError", "QuotaGone: no more")


async def test_a_tool_error_with_an_unknown_code_is_the_tools_failure() -> None:
    registry = ToolRegistry(QUIET)

    def bad_code(args: Any, ctx: ToolRunContext) -> Any:
        raise ToolError("quota gone", code="NOT_A_CODE")

    registry.register(define_tool(name="q", description="", parameters={}, execute=bad_code))
    result = await registry.invoke("q", {})
    assert result.code is ErrorCode.TOOL_ERROR
    assert result.error is not None
    assert result.error.name == "ToolExecutionError"
    assert result.error.message == (
        "quota gone (the tool raised ToolError with the unknown code 'NOT_A_CODE')"
    )


async def test_a_tool_error_with_malformed_content_is_the_tools_failure() -> None:
    registry = ToolRegistry(QUIET)

    def bad_content(args: Any, ctx: ToolRunContext) -> Any:
        raise ToolError("nope", code="DENIED", content=42)

    registry.register(define_tool(name="c", description="", parameters={}, execute=bad_content))
    result = await registry.invoke("c", {})
    assert result.code is ErrorCode.TOOL_ERROR
    assert result.error is not None
    assert result.error.name == "ToolExecutionError"
    assert result.error.message.startswith("the tool raised a malformed ToolError: TypeError:")


async def test_a_fault_in_the_pipelines_own_steps_is_not_blamed_on_a_wrapper(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    registry = ToolRegistry(QUIET)
    sentinel = "value our own freeze chokes on"

    def faulty_freeze(value: Any) -> Any:  # stands in for a bug in our normalisation
        if value == sentinel:
            raise RuntimeError("normalisation bug")
        return freeze(value)

    monkeypatch.setattr(_pipeline, "freeze", faulty_freeze)
    registry.register(
        define_tool(name="s", description="", parameters={}, execute=lambda a, c: sentinel)
    )
    seen: list[ToolResult] = []

    async def passthrough(call: ToolCall, next_: Any) -> ToolResult:
        result: ToolResult = await next_()
        seen.append(result)
        return result

    for with_wrapper in (False, True):
        if with_wrapper:
            registry.wrap_execute(passthrough)
        caplog.clear()
        result = await registry.invoke("s", {})
        assert result.code is ErrorCode.TOOL_ERROR
        assert result.error is not None
        assert result.error.name == "ToolPipelineError"
        assert result.error.message == (
            "internal error in the tool pipeline: RuntimeError: normalisation bug"
        )
        [record] = [r for r in caplog.records if r.name == "host.tools"]
        assert record.levelname == "ERROR"
        assert record.exc_info is not None
    assert seen == [result]  # the wrapper got a result, not our exception


async def test_an_invocation_needs_only_a_resolver_and_its_hooks_and_events() -> None:
    class OneTool:  # the one method the pipeline needs from a registry
        def get(self, name: str, scope: Scope | None = None) -> ToolDefinition | None:
            return echo() if name == "echo" else None

    hooks, events = Hooks(), Events()
    trace: list[str] = []
    hooks.guards.add(lambda call: trace.append(f"guard {call.name}"))
    events.on("result", lambda event: trace.append(f"result {event.result.value}"))
    scope = ToolRegistry(QUIET).root
    for name in ("echo", "nope"):
        invocation = Invocation(
            OneTool(),
            hooks,
            events,
            name=name,
            args={"text": "hi"},
            scope=scope,
            signal=AbortSignal(),
            call_id=None,
        )
        await invocation.prepare()
        await invocation.dispatch()
        await invocation.finish()
    assert trace == ["guard echo", "result hi", "result None"]
    assert invocation.result is not None
    assert invocation.result.code is ErrorCode.UNKNOWN_TOOL


async def test_the_ask_handler_can_be_set_after_construction() -> None:
    registry = ToolRegistry(QUIET)
    registry.register(echo())
    registry.pre_execute(lambda call, decision: Ask("run echo?"))
    assert registry.ask_handler is None
    assert (await registry.invoke("echo", {"text": "x"})).code is ErrorCode.DENIED

    def approve(call: ToolCall, ask: Ask) -> bool:
        return True

    registry.ask_handler = approve
    assert registry.ask_handler is approve
    assert not (await registry.invoke("echo", {"text": "x"})).is_error
