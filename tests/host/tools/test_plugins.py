"""The guard plugins: the timeout policy and the repeat-tool reminder."""

from __future__ import annotations

import gc
from typing import Any

import anyio
import pytest

from host.tools import (
    AbortController,
    Deny,
    ErrorCode,
    PostDecision,
    RepeatReminderConfig,
    RepeatToolReminder,
    ToolRegistry,
    ToolResult,
    ToolRunContext,
    ToolsConfig,
    define_tool,
    schema,
)

from .helpers import echo

pytestmark = pytest.mark.anyio
SOURCE = {"kind": "plugin", "plugin": "repeat-tool-reminder"}


def sleeper(name: str, seconds: float, timeout_ms: int | None, seen: list[Any]) -> Any:
    async def run(args: Any, ctx: ToolRunContext) -> Any:
        seen.append(ctx.signal)
        await anyio.sleep(seconds)
        return "done"

    return define_tool(name=name, description="", parameters={}, execute=run, timeout_ms=timeout_ms)


# -- timeout policy ----------------------------------------------------------------------------


async def test_tool_timeout_when_its_own_timer_fires() -> None:
    registry = ToolRegistry(ToolsConfig(repeat_reminder=None))
    seen: list[Any] = []
    registry.register(sleeper("slow", 30, 50, seen))
    with anyio.fail_after(5):
        result = await registry.invoke("slow", {})
    assert result.to_dict() == {
        "is_error": True,
        "error": {
            "message": "tool call timed out after 50ms",
            "info": {"name": "ToolTimeoutError", "code": "TOOL_TIMEOUT"},
        },
        "content": [{"type": "text", "text": "Error: tool call timed out after 50ms"}],
    }
    assert seen[0].is_set()


def _mock_clock() -> object:
    """trio with a clock that jumps to the next deadline whenever every task waits."""
    import trio.testing

    return pytest.param(
        ("trio", {"clock": trio.testing.MockClock(autojump_threshold=0)}), id="trio-mock-clock"
    )


@pytest.mark.parametrize("anyio_backend", [_mock_clock()])
async def test_the_timeout_fires_at_its_deadline_on_a_controlled_clock() -> None:
    registry = ToolRegistry(ToolsConfig(repeat_reminder=None))
    seen: list[Any] = []
    registry.register(sleeper("slow", 3600, 250, seen))
    registry.register(sleeper("just_in_time", 0.249, 250, seen))
    started = anyio.current_time()
    result = await registry.invoke("slow", {})
    assert result.code is ErrorCode.TOOL_TIMEOUT
    assert anyio.current_time() - started == pytest.approx(0.25)  # not an hour, not sooner
    started = anyio.current_time()
    assert (await registry.invoke("just_in_time", {})).value == "done"
    assert anyio.current_time() - started == pytest.approx(0.249)


async def test_fast_tools_and_tools_without_budget_are_untouched() -> None:
    registry = ToolRegistry(ToolsConfig(repeat_reminder=None))
    seen: list[Any] = []
    registry.register(sleeper("fast", 0, 1000, seen))
    registry.register(sleeper("unbounded", 0.08, None, seen))
    assert (await registry.invoke("fast", {})).value == "done"
    assert (await registry.invoke("unbounded", {})).value == "done"


async def test_timeout_beats_the_tool_error_an_abort_provoked() -> None:
    registry = ToolRegistry(ToolsConfig(repeat_reminder=None))

    async def run(args: Any, ctx: ToolRunContext) -> Any:
        await ctx.signal.wait()
        raise RuntimeError("upstream aborted")

    registry.register(
        define_tool(name="t", description="", parameters={}, execute=run, timeout_ms=30)
    )
    assert (await registry.invoke("t", {})).code is ErrorCode.TOOL_TIMEOUT


async def test_caller_abort_is_not_a_timeout() -> None:
    registry = ToolRegistry(ToolsConfig(repeat_reminder=None))
    seen: list[Any] = []
    registry.register(sleeper("slow", 30, 10_000, seen))
    controller = AbortController()
    results: list[ToolResult] = []

    async def call() -> None:
        results.append(await registry.invoke("slow", {}, signal=controller.signal))

    async with anyio.create_task_group() as group:
        group.start_soon(call)
        while not seen:
            await anyio.sleep(0.001)
        controller.abort()
    assert results[0].code is ErrorCode.ABORTED


async def test_timeout_policy_can_be_disabled() -> None:
    registry = ToolRegistry(ToolsConfig(timeout_policy=False, repeat_reminder=None))
    seen: list[Any] = []
    registry.register(sleeper("slow", 0.1, 10, seen))
    assert (await registry.invoke("slow", {})).value == "done"


# -- repeat-tool reminder ----------------------------------------------------------------------


def reminder_registry(**config: Any) -> ToolRegistry:
    registry = ToolRegistry(
        ToolsConfig(timeout_policy=False, repeat_reminder=RepeatReminderConfig(**config))
    )
    registry.register(echo("grep"))
    registry.register(echo("todo_write"))
    registry.register(echo("read"))
    return registry


def reminders(result: ToolResult) -> list[str]:
    out = []
    for context in result.to_dict().get("additional_contexts", []):
        assert context["source"] == SOURCE
        out.append(context["content"][0]["text"])
    return out


async def run_sequence(
    registry: ToolRegistry, calls: list[tuple[str, Any]], scope: Any = None
) -> list[list[str]]:
    out = []
    for name, args in calls:
        out.append(reminders(await registry.invoke(name, args, scope=scope)))
    return out


async def test_thresholds_first_short_then_detailed() -> None:
    registry = reminder_registry()
    got = await run_sequence(registry, [("grep", {"text": "x"})] * 9)
    fired = [index + 1 for index, texts in enumerate(got) if texts]
    assert fired == [3, 5, 8]
    assert "3 times in a row" in got[2][0]
    assert '{"text":"x"}' not in got[2][0]
    assert "5 consecutive times" in got[4][0]
    assert '{"text":"x"}' in got[4][0]
    assert "8 consecutive times" in got[7][0]


async def test_content_is_never_replaced() -> None:
    registry = reminder_registry()
    results = [await registry.invoke("grep", {"text": "x"}) for _ in range(3)]
    assert results[2].to_dict()["content"] == [{"type": "text", "text": "x"}]
    assert results[2].value == "x"


async def test_key_order_is_normalized_and_different_args_reset() -> None:
    registry = reminder_registry()
    registry.register(
        define_tool(
            name="multi",
            description="",
            parameters={"a": schema.json(), "b": schema.json()},
            execute=lambda args, ctx: None,
        )
    )
    got = await run_sequence(
        registry,
        [
            ("multi", {"a": 1, "b": {"y": 1, "x": 2}}),
            ("multi", {"b": {"x": 2, "y": 1}, "a": 1}),
            ("multi", {"a": 2}),
            ("multi", {"a": 2}),
            ("multi", {"a": 2}),
        ],
    )
    assert [bool(texts) for texts in got] == [False, False, False, False, True]


async def test_excluded_tools_neither_count_nor_reset() -> None:
    registry = reminder_registry()
    got = await run_sequence(
        registry,
        [
            ("grep", {"text": "x"}),
            ("todo_write", {"text": "note"}),
            ("grep", {"text": "x"}),
            ("todo_write", {"text": "note"}),
            ("todo_write", {"text": "note"}),
            ("todo_write", {"text": "note"}),
            ("grep", {"text": "x"}),
        ],
    )
    assert [bool(texts) for texts in got] == [False] * 6 + [True]


async def test_include_patterns_limit_tracking() -> None:
    registry = reminder_registry(include=("gr*",), exclude=())
    got = await run_sequence(
        registry, [("read", {"text": "a"})] * 3 + [("grep", {"text": "a"})] * 3
    )
    assert [bool(texts) for texts in got] == [False] * 5 + [True]


async def test_rejected_calls_count() -> None:
    registry = reminder_registry()
    registry.pre_execute(lambda call, decision: Deny("no grep"))
    results = [await registry.invoke("grep", {"text": "x"}) for _ in range(3)]
    assert results[2].code is ErrorCode.DENIED
    assert reminders(results[2])


async def test_chains_are_per_agent_and_reset_by_a_user_prompt() -> None:
    registry = reminder_registry()
    first, second = registry.agent_scope(), registry.agent_scope()
    call = ("grep", {"text": "x"})
    await run_sequence(registry, [call, call], scope=first)
    assert await run_sequence(registry, [call, call], scope=second) == [[], []]
    assert (await run_sequence(registry, [call], scope=first))[0]
    registry.emit("agent/pre-step", second)
    assert await run_sequence(registry, [call], scope=second) == [[]]
    assert registry.reminder is not None
    assert registry.reminder.count(second) == 1


async def test_chains_are_weakly_keyed() -> None:
    registry = reminder_registry()
    scope = registry.agent_scope()
    await registry.invoke("grep", {"text": "x"}, scope=scope)
    reminder = registry.reminder
    assert isinstance(reminder, RepeatToolReminder)
    assert len(reminder._chains) == 1
    del scope
    gc.collect()
    assert len(reminder._chains) == 0


async def test_detailed_reminder_truncates_the_arguments_head() -> None:
    registry = reminder_registry(thresholds=(1, 2), arguments_preview_chars=20)
    long_text = "a" * 100
    got = await run_sequence(registry, [("grep", {"text": long_text})] * 2)
    normalized = '{"text":"' + long_text + '"}'
    detailed = got[1][0]
    assert normalized[:20] + f"…[{len(normalized) - 20} more chars]" in detailed
    assert normalized not in detailed


async def test_reminder_contexts_follow_other_contexts() -> None:
    registry = reminder_registry(thresholds=(1,))
    registry.post_execute(lambda call, result: PostDecision(additional_contexts=("mine",)))
    result = await registry.invoke("grep", {"text": "x"})
    texts = [c["content"][0]["text"] for c in result.to_dict()["additional_contexts"]]
    assert texts[0] == "mine"
    assert "Reminder" in texts[1]


async def test_reminder_can_be_disabled() -> None:
    registry = ToolRegistry(ToolsConfig(repeat_reminder=None))
    registry.register(echo("grep"))
    assert registry.reminder is None
    for _ in range(3):
        result = await registry.invoke("grep", {"text": "x"})
    assert result.additional_contexts == ()
