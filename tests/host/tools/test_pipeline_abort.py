"""The pipeline's cancellation rules: pre-aborted calls, abort timing, signals, bodies."""

from __future__ import annotations

import threading
from typing import Any

import anyio
import pytest

from host.tools import (
    AbortController,
    AbortSignal,
    Deny,
    ErrorCode,
    FrozenDict,
    PostDecision,
    RunSettled,
    ToolCall,
    ToolRegistry,
    ToolResult,
    ToolResultEvent,
    ToolRunContext,
    ToolsConfig,
    define_tool,
)

from .helpers import QUIET, echo, traced_registry

pytestmark = pytest.mark.anyio


async def test_pre_aborted_call_skips_policy_and_dispatch() -> None:
    trace: list[str] = []
    registry = traced_registry(trace)
    events: list[ToolResultEvent] = []
    registry.on("result", events.append)
    controller = AbortController()
    controller.abort()
    result = await registry.invoke("t", {"text": ["x"]}, signal=controller.signal)
    assert result.code is ErrorCode.ABORTED_BEFORE_DISPATCH
    assert trace == ["finalize", "result"]
    assert isinstance(events[0].call.args, FrozenDict)
    assert events[0].result is result


async def test_wrapper_replaces_the_signal_but_the_caller_signal_is_refused() -> None:
    registry = ToolRegistry(QUIET)
    seen: list[AbortSignal] = []
    started = anyio.Event()

    async def run(args: Any, ctx: ToolRunContext) -> Any:
        seen.append(ctx.signal)
        started.set()
        await anyio.sleep(30)
        return "never"

    registry.register(define_tool(name="slow", description="", parameters={}, execute=run))
    replacement = AbortController()

    async def wrap(call: ToolCall, next_: Any) -> ToolResult:
        result: ToolResult = await next_(replacement.signal)
        return result

    registry.wrap_execute(wrap)
    caller = AbortController()
    results: list[ToolResult] = []

    async def call() -> None:
        results.append(await registry.invoke("slow", {}, signal=caller.signal))

    async with anyio.create_task_group() as group:
        group.start_soon(call)
        await started.wait()
        assert seen[0] is not caller.signal
        caller.abort("user pressed stop")
    assert results[0].code is ErrorCode.ABORTED
    assert seen[0].is_set()


async def test_deferred_contexts_survive_failure_and_cancellation() -> None:
    registry = ToolRegistry(QUIET)
    started = anyio.Event()

    async def fails(args: Any, ctx: ToolRunContext) -> Any:
        ctx.defer_context("saw a file")
        raise RuntimeError("then failed")

    async def hangs(args: Any, ctx: ToolRunContext) -> Any:
        ctx.defer_context("progress so far")
        started.set()
        await anyio.sleep(30)

    registry.register(define_tool(name="fails", description="", parameters={}, execute=fails))
    registry.register(define_tool(name="hangs", description="", parameters={}, execute=hangs))
    registry.post_execute(lambda call, result: PostDecision(additional_contexts=("post",)))
    failed = await registry.invoke("fails", {})
    assert failed.code is ErrorCode.TOOL_ERROR
    texts = [c["content"][0]["text"] for c in failed.to_dict()["additional_contexts"]]
    assert texts == ["saw a file", "post"]
    controller = AbortController()
    results: list[ToolResult] = []

    async def call() -> None:
        results.append(await registry.invoke("hangs", {}, signal=controller.signal))

    async with anyio.create_task_group() as group:
        group.start_soon(call)
        await started.wait()
        controller.abort()
    assert results[0].code is ErrorCode.ABORTED
    assert results[0].additional_contexts[0]["content"][0]["text"] == "progress so far"


async def test_abort_during_policy_is_aborted_before_dispatch() -> None:
    trace: list[str] = []
    registry = traced_registry(trace)
    controller = AbortController()
    registry.pre_execute(lambda call, decision: controller.abort())
    result = await registry.invoke("t", {"text": "x"}, signal=controller.signal)
    assert result.code is ErrorCode.ABORTED_BEFORE_DISPATCH
    assert "body" not in trace
    assert trace.count("finalize") == 1


async def test_denial_stays_more_specific_than_abort() -> None:
    registry = ToolRegistry(QUIET)
    registry.register(echo())
    controller = AbortController()

    def deny_and_abort(call: ToolCall, decision: Any) -> Any:
        controller.abort()
        return Deny("no")

    registry.pre_execute(deny_and_abort)
    result = await registry.invoke("echo", {"text": "x"}, signal=controller.signal)
    assert result.code is ErrorCode.DENIED


async def test_abort_in_a_wrapper_before_the_body_is_aborted_before_dispatch() -> None:
    registry = ToolRegistry(QUIET)
    ran: list[int] = []
    registry.register(echo())
    registry.register(
        define_tool(name="b", description="", parameters={}, execute=lambda a, c: ran.append(1))
    )
    controller = AbortController()

    async def wrap(call: ToolCall, next_: Any) -> ToolResult:
        controller.abort()
        result: ToolResult = await next_()
        return result

    registry.wrap_execute(wrap)
    result = await registry.invoke("b", {}, signal=controller.signal)
    assert result.code is ErrorCode.ABORTED_BEFORE_DISPATCH
    assert ran == []


async def test_success_after_abort_becomes_aborted_but_failures_stay() -> None:
    registry = ToolRegistry(QUIET)
    controllers: dict[str, AbortController] = {}

    async def swallows(args: Any, ctx: ToolRunContext) -> Any:
        controllers["swallows"].abort()
        with anyio.CancelScope(shield=True):
            await anyio.sleep(0)
        return "finished anyway"

    def sync_checks(args: Any, ctx: ToolRunContext) -> Any:
        anyio.from_thread.run_sync(controllers["sync_checks"].abort)
        if ctx.signal.is_set():
            raise RuntimeError("stopped early")
        return "unreachable"

    def sync_ignores(args: Any, ctx: ToolRunContext) -> Any:
        anyio.from_thread.run_sync(controllers["sync_ignores"].abort)
        return "done"

    for name, run in (("swallows", swallows), ("sync_checks", sync_checks)):
        registry.register(define_tool(name=name, description="", parameters={}, execute=run))
    registry.register(
        define_tool(name="sync_ignores", description="", parameters={}, execute=sync_ignores)
    )
    codes = {}
    for name in ("swallows", "sync_checks", "sync_ignores"):
        controllers[name] = AbortController()
        result = await registry.invoke(name, {}, signal=controllers[name].signal)
        codes[name] = result.code
    assert codes == {
        "swallows": ErrorCode.ABORTED,
        "sync_checks": ErrorCode.TOOL_ERROR,
        "sync_ignores": ErrorCode.ABORTED,
    }


async def test_sync_bodies_run_off_the_loop_and_are_awaited_to_the_end() -> None:
    registry = ToolRegistry(QUIET)
    loop_thread = threading.get_ident()
    seen: dict[str, Any] = {}
    entered = threading.Event()

    def run(args: Any, ctx: ToolRunContext) -> Any:
        seen["thread"] = threading.get_ident()
        entered.set()
        while not ctx.signal.is_set():
            threading.Event().wait(0.005)
        threading.Event().wait(0.05)
        seen["finished"] = True
        return "late"

    registry.register(define_tool(name="s", description="", parameters={}, execute=run))
    controller = AbortController()
    results: list[ToolResult] = []

    async def call() -> None:
        results.append(await registry.invoke("s", {}, signal=controller.signal))

    async with anyio.create_task_group() as group:
        group.start_soon(call)
        while not entered.is_set():
            await anyio.sleep(0.005)
        controller.abort()
    assert seen["thread"] != loop_thread
    assert seen.get("finished") is True
    assert results[0].code is ErrorCode.ABORTED


async def test_async_body_is_cancelled_at_its_await_and_cleans_up_first() -> None:
    registry = ToolRegistry(QUIET)
    cleaned: list[bool] = []
    started = anyio.Event()

    async def run(args: Any, ctx: ToolRunContext) -> Any:
        started.set()
        try:
            await anyio.sleep(30)
        finally:
            with anyio.CancelScope(shield=True):
                await anyio.sleep(0.01)
            cleaned.append(True)

    registry.register(define_tool(name="a", description="", parameters={}, execute=run))
    controller = AbortController()
    results: list[ToolResult] = []

    async def call() -> None:
        results.append(await registry.invoke("a", {}, signal=controller.signal))
        assert cleaned == [True]

    with anyio.fail_after(5):
        async with anyio.create_task_group() as group:
            group.start_soon(call)
            await started.wait()
            controller.abort("stop")
    assert results[0].code is ErrorCode.ABORTED
    assert results[0].error is not None
    assert results[0].error.message == "tool call was aborted: stop"


async def _abort_a_deaf_sync_body(reason: object) -> tuple[ToolResult, float]:
    """Abort a call whose sync body ignores its signal; its result and how long after the
    abort the call returned."""
    registry = ToolRegistry(QUIET)
    release, entered = threading.Event(), threading.Event()

    def deaf(args: Any, ctx: ToolRunContext) -> Any:
        entered.set()
        release.wait(30)
        return "too late"

    registry.register(define_tool(name="deaf", description="", parameters={}, execute=deaf))
    controller = AbortController()
    results: list[ToolResult] = []

    async def call() -> None:
        results.append(await registry.invoke("deaf", {}, signal=controller.signal))

    try:
        async with anyio.create_task_group() as group:
            group.start_soon(call)
            while not entered.is_set():
                await anyio.sleep(0.005)
            aborted_at = anyio.current_time()
            controller.abort(reason)
        return results[0], anyio.current_time() - aborted_at
    finally:
        release.set()


async def test_a_sync_body_deaf_to_the_abort_is_abandoned_after_the_grace() -> None:
    result, took = await _abort_a_deaf_sync_body("aborted")
    assert result.code is ErrorCode.ABORTED
    # The grace (one second), not the body's thirty: a generous sanity bound.
    assert 0.5 < took < 10


def _mock_clock() -> object:
    """trio with a clock that jumps to the next deadline whenever every task waits."""
    import trio.testing

    return pytest.param(
        ("trio", {"clock": trio.testing.MockClock(autojump_threshold=0)}), id="trio-mock-clock"
    )


@pytest.mark.parametrize("anyio_backend", [_mock_clock()])
@pytest.mark.parametrize(
    ("reason", "grace"),
    [("stop", 1.0), (RunSettled("the program's run settled"), 0.0)],
    ids=["plain-abort", "run-settled"],
)
async def test_a_sync_body_gets_no_grace_once_nothing_waits_for_its_call(
    reason: object, grace: float
) -> None:
    # A plain abort gives a deaf sync body its second; an abort saying the run has settled
    # (code mode's, after the program's run returned) abandons it at once: the run's caller
    # must not wait past the run's budget. The clock is virtual: the grace is exact.
    result, took = await _abort_a_deaf_sync_body(reason)
    assert result.code is ErrorCode.ABORTED
    assert took == pytest.approx(grace, abs=0.01)


async def test_a_sync_body_past_its_timeout_is_a_timeout_even_if_it_never_returns() -> None:
    registry = ToolRegistry(ToolsConfig(repeat_reminder=None))
    release = threading.Event()

    def deaf(args: Any, ctx: ToolRunContext) -> Any:
        release.wait(30)
        return "too late"

    registry.register(
        define_tool(name="deaf", description="", parameters={}, execute=deaf, timeout_ms=50)
    )
    try:
        with anyio.fail_after(10):
            result = await registry.invoke("deaf", {})
    finally:
        release.set()
    assert result.code is ErrorCode.TOOL_TIMEOUT


async def test_cancelling_the_caller_abandons_a_sync_body_at_once() -> None:
    registry = ToolRegistry(QUIET)
    release = threading.Event()
    entered = threading.Event()

    def deaf(args: Any, ctx: ToolRunContext) -> Any:
        entered.set()
        release.wait(30)
        return "too late"

    registry.register(define_tool(name="deaf", description="", parameters={}, execute=deaf))
    try:
        with anyio.move_on_after(5) as outer:
            async with anyio.create_task_group() as group:
                group.start_soon(registry.invoke, "deaf", {})
                while not entered.is_set():
                    await anyio.sleep(0.005)
                cancelled_at = anyio.current_time()
                group.cancel_scope.cancel()
        took = anyio.current_time() - cancelled_at
    finally:
        release.set()
    assert not outer.cancelled_caught
    assert took < 0.5  # not the grace: a settled run waits for no thread
