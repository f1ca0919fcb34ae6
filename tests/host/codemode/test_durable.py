"""Durable runs through code mode: a held call pauses ``run_code``, one call resumes it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from host.codemode import DISPATCH_EVENT, CodeMode, CodeModeConfig
from host.sandbox import SubprocessRuntime
from host.tools import Ask, Pause, ToolCall, ToolRegistry, ToolsConfig, define_tool
from runtime import CodeRuntime, JournalError, Limits
from runtime.testing import InProcessRuntime
from tests.durable import CHARGE_THEN_RECEIPT

pytestmark = pytest.mark.anyio


class Shop:
    """``charge`` and ``send_receipt`` as registry tools; the receipt needs a person's yes."""

    def __init__(self) -> None:
        self.executed = {"charge": 0, "send_receipt": 0}
        self.call_ids: list[str | None] = []
        self.registry = ToolRegistry(ToolsConfig(mode="code"), ask_handler=self._no_answer_yet)
        self.registry.register(
            define_tool(
                name="charge",
                description="Charge an amount.",
                parameters={"type": "object", "properties": {"amount": {"type": "integer"}}},
                execute=self._charge,
            )
        )
        self.registry.register(
            define_tool(
                name="send_receipt",
                description="Send the receipt.",
                parameters={"type": "object", "properties": {"to": {"type": "string"}}},
                execute=self._send,
            )
        )
        self.registry.pre_execute(self._needs_approval)

    def _charge(self, args: Any, ctx: Any) -> dict[str, Any]:
        self.executed["charge"] += 1
        self.call_ids.append(ctx.call_id)
        return {"id": f"ch_{self.executed['charge']}", "amount": args["amount"]}

    def _send(self, args: Any, ctx: Any) -> str:
        self.executed["send_receipt"] += 1
        self.call_ids.append(ctx.call_id)
        return f"sent to {args['to']}"

    @staticmethod
    def _needs_approval(call: ToolCall, decision: Any) -> Any:
        return Ask("send the receipt?") if call.name == "send_receipt" else None

    @staticmethod
    def _no_answer_yet(call: ToolCall, ask: Ask) -> Pause:
        return Pause(f"waiting for a person: {ask.prompt}")


@pytest.fixture(params=["in-process", "subprocess"])
async def runtime(request: pytest.FixtureRequest) -> AsyncIterator[CodeRuntime]:
    if request.param == "in-process":
        async with InProcessRuntime() as fake:
            yield fake
    else:
        async with SubprocessRuntime() as real:
            yield real


CONFIG = CodeModeConfig(limits=Limits(compute_ms=10_000, max_wall_ms=30_000))


async def test_run_code_says_it_paused_and_on_what(runtime: CodeRuntime) -> None:
    shop = Shop()
    codemode = CodeMode(shop.registry, runtime, CONFIG)
    result = await codemode.run(CHARGE_THEN_RECEIPT)
    assert not result.is_error
    value = result.to_dict()["value"]
    (held,) = value["paused"]["pending"]
    run_id = value["paused"]["run_id"]
    assert value["logs"] == ["charging", "charged ch_1"] and "result" not in value
    assert held == {
        "call_id": f"{run_id}:2",
        "tool": "send_receipt",
        "args": {"to": "a@example.com"},
        "reason": "waiting for a person: send the receipt?",
    }
    text = result.to_dict()["content"][0]["text"]
    assert f"paused (run {run_id})" in text and 'send_receipt({"to": "a@example.com"})' in text
    assert codemode.paused.get(run_id) is not None
    assert shop.executed == {"charge": 1, "send_receipt": 0}


async def test_resuming_is_one_call_and_runs_each_tool_once(runtime: CodeRuntime) -> None:
    shop = Shop()
    codemode = CodeMode(shop.registry, runtime, CONFIG)
    dispatched: list[tuple[str, bool]] = []
    shop.registry.on(
        DISPATCH_EVENT, lambda payload: dispatched.append((payload["name"], payload["is_error"]))
    )
    paused = await codemode.run(CHARGE_THEN_RECEIPT)
    run_id = paused.to_dict()["value"]["paused"]["run_id"]
    done = await codemode.resume(run_id, approve=True)
    assert not done.is_error, done.to_dict()
    assert done.to_dict()["value"] == {
        "logs": ["receipt: sent to a@example.com"],
        "result": {"charge": {"id": "ch_1", "amount": 5}, "receipt": "sent to a@example.com"},
    }
    assert shop.executed == {"charge": 1, "send_receipt": 1}
    assert shop.call_ids == [f"{run_id}:1", f"{run_id}:2"]
    # the held call was dispatched (and paused), then again when allowed; the replayed
    # charge was not dispatched a second time
    assert dispatched == [("charge", False), ("send_receipt", True), ("send_receipt", False)]
    assert codemode.paused.get(run_id) is None
    with pytest.raises(JournalError, match="no paused run"):
        await codemode.resume(run_id, approve=True)


async def test_a_refusal_raises_in_the_program(runtime: CodeRuntime) -> None:
    shop = Shop()
    codemode = CodeMode(shop.registry, runtime, CONFIG)
    paused = await codemode.run(CHARGE_THEN_RECEIPT)
    done = await codemode.resume(paused.to_dict()["value"]["paused"]["run_id"], approve=False)
    assert done.to_dict()["value"]["result"]["receipt"] == "refused (DENIED)"
    assert shop.executed == {"charge": 1, "send_receipt": 0}


async def test_a_resume_without_a_decision_asks_again_and_pauses_again(
    runtime: CodeRuntime,
) -> None:
    shop = Shop()
    codemode = CodeMode(shop.registry, runtime, CONFIG)
    paused = await codemode.run(CHARGE_THEN_RECEIPT)
    run_id = paused.to_dict()["value"]["paused"]["run_id"]
    again = await codemode.resume(run_id)
    assert again.to_dict()["value"]["paused"]["run_id"] == run_id
    assert again.to_dict()["value"]["logs"] == []
    done = await codemode.resume(run_id, decisions={f"{run_id}:2": "allow"})
    assert done.to_dict()["value"]["result"]["receipt"] == "sent to a@example.com"
    assert shop.executed == {"charge": 1, "send_receipt": 1}


async def test_a_journal_resumes_on_another_code_mode(runtime: CodeRuntime) -> None:
    shop = Shop()
    first = CodeMode(shop.registry, runtime, CONFIG)
    result = await first.run_program(CHARGE_THEN_RECEIPT)
    assert result.paused and result.journal is not None
    other = Shop()  # another process's registry, say
    other.executed = shop.executed
    second = CodeMode(other.registry, runtime, CONFIG)
    done = await second.resume(result.journal, approve=True)
    assert done.to_dict()["value"]["result"]["receipt"] == "sent to a@example.com"
    assert shop.executed == {"charge": 1, "send_receipt": 1}


async def test_a_paused_session_step_commits_nothing(runtime: CodeRuntime) -> None:
    if not hasattr(runtime, "session"):
        pytest.skip("the in-process fake keeps no sessions")
    shop = Shop()
    codemode = CodeMode(shop.registry, runtime, CONFIG)
    async with codemode.session() as session:
        await session.run("total = 0")
        step = "total += (await tools.charge(amount=5))['amount']\nawait tools.send_receipt(to='x')\nreturn total"
        paused = await session.run(step)
        run_id = paused.to_dict()["value"]["paused"]["run_id"]
        assert (await session.run("return total")).to_dict()["value"]["result"] == 0
        done = await session.resume(run_id, approve=True)
        assert done.to_dict()["value"]["result"] == 5
        assert (await session.run("return total")).to_dict()["value"]["result"] == 5
    assert shop.executed == {"charge": 1, "send_receipt": 1}


async def test_replayed_calls_count_against_max_tool_calls(runtime: CodeRuntime) -> None:
    shop = Shop()
    config = CodeModeConfig(limits=CONFIG.limits, max_tool_calls=2)
    codemode = CodeMode(shop.registry, runtime, config)
    program = CHARGE_THEN_RECEIPT.replace("return {", "await tools.charge(amount=1)\nreturn {")
    paused = await codemode.run(program)
    done = await codemode.resume(paused.to_dict()["value"]["paused"]["run_id"], approve=True)
    failed = done.to_dict()
    assert failed["is_error"] and "max_tool_calls" in failed["meta"]["code_run"]["message"]
