"""The Pause decision: from a pre-execute hook, a guard or the ask handler; let through once
a person approved the call (``approved``)."""

from __future__ import annotations

from typing import Any

import pytest

from host.tools import Allow, Ask, ErrorCode, Pause, ToolCall, ToolError, ToolRegistry, define_tool
from tests.host.tools.helpers import QUIET, echo

pytestmark = pytest.mark.anyio


def _registry(**options: Any) -> tuple[ToolRegistry, list[str]]:
    ran: list[str] = []

    def run(args: Any, ctx: Any) -> str:
        ran.append(args["text"])
        return str(args["text"])

    registry = ToolRegistry(QUIET, **options)
    registry.register(
        define_tool(
            name="echo",
            description="Echo.",
            parameters={"type": "object", "properties": {"text": {"type": "string"}}},
            execute=run,
        )
    )
    return registry, ran


async def test_a_pre_execute_hook_pauses_a_call() -> None:
    registry, ran = _registry()
    registry.pre_execute(lambda call, decision: Pause("waiting for a manager"))
    result = await registry.invoke("echo", {"text": "x"})
    assert result.code is ErrorCode.PAUSED and result.is_error
    assert result.error is not None
    assert result.error.message == "tool call echo paused: waiting for a manager"
    assert result.error.name == "ToolPausedError"
    assert result.meta == {"paused": {"reason": "waiting for a manager"}}
    assert ran == []


async def test_a_later_hook_sees_and_may_replace_the_pause() -> None:
    registry, ran = _registry()
    seen: list[Any] = []
    registry.pre_execute(lambda call, decision: Pause("later"), order=1)

    def second(call: ToolCall, decision: Any) -> Any:
        seen.append(decision)
        return Allow()

    registry.pre_execute(second, order=2)
    result = await registry.invoke("echo", {"text": "x"})
    assert not result.is_error and seen == [Pause("later")] and ran == ["x"]


async def test_the_ask_handler_may_hold_the_call() -> None:
    async def no_answer_yet(call: ToolCall, ask: Ask) -> Pause:
        return Pause(f"no answer yet to: {ask.prompt}")

    registry, ran = _registry(ask_handler=no_answer_yet)
    registry.pre_execute(lambda call, decision: Ask("send it?"))
    result = await registry.invoke("echo", {"text": "x"})
    assert result.code is ErrorCode.PAUSED
    assert result.meta == {"paused": {"reason": "no answer yet to: send it?"}}
    assert ran == []


async def test_a_guard_may_hold_the_call() -> None:
    registry, ran = _registry()
    registry.guard(lambda call: Pause("quiet hours"))
    result = await registry.invoke("echo", {"text": "x"})
    assert result.code is ErrorCode.PAUSED and ran == []


@pytest.mark.parametrize("decision", [Ask("send it?"), Pause("later")])
async def test_an_approved_call_passes_ask_and_pause_without_asking(decision: Any) -> None:
    asked: list[Any] = []

    def handler(call: ToolCall, ask: Ask) -> bool:
        asked.append(ask)
        return False

    registry, ran = _registry(ask_handler=handler)
    seen: list[bool] = []

    def hook(call: ToolCall, current: Any) -> Any:
        seen.append(call.approved)
        return decision

    registry.pre_execute(hook)
    registry.guard(lambda call: Pause("guard says later"))
    result = await registry.invoke("echo", {"text": "x"}, approved=True)
    assert not result.is_error and ran == ["x"]
    assert asked == [] and seen == [True]


async def test_approval_does_not_lift_a_denial() -> None:
    registry, ran = _registry()
    registry.pre_execute(lambda call, decision: Pause("later"), order=1)
    registry.pre_execute(lambda call, decision: None, order=2)
    from host.tools import Deny

    registry.pre_execute(lambda call, decision: Deny("never"), order=3)
    result = await registry.invoke("echo", {"text": "x"}, approved=True)
    assert result.code is ErrorCode.DENIED and ran == []


async def test_a_tool_may_say_not_now() -> None:
    def run(args: Any, ctx: Any) -> None:
        raise ToolError("the printer is busy", code="PAUSED")

    registry = ToolRegistry(QUIET)
    registry.register(define_tool(name="print", description="Print.", parameters={}, execute=run))
    registry.register(echo())
    result = await registry.invoke("print", {})
    assert result.code is ErrorCode.PAUSED
    assert result.error is not None and result.error.message == "the printer is busy"
