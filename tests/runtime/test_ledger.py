"""The call ledger every backend uses, through the in-process fake: journal, pause, resume."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from runtime import (
    FAILURE_KINDS,
    HoldCall,
    Journal,
    JournalError,
    Limits,
    RunRequest,
    RunResult,
    current_call,
)
from runtime.testing import InProcessRuntime
from tests.conftest import ALL_BACKENDS
from tests.durable import (
    CHARGE_THEN_RECEIPT,
    GATHER_THREE,
    SETTLE_ORDER,
    Shop,
    assert_the_gather_resumed_once_each,
)

pytestmark = pytest.mark.anyio


@pytest.fixture(params=ALL_BACKENDS)
def anyio_backend(request: pytest.FixtureRequest) -> object:
    """asyncio as anyio runs it, as plain ``asyncio.run`` runs it, and trio."""
    return request.param


async def _run(shop: Shop, program: str, **resume: Any) -> RunResult:
    async with InProcessRuntime() as runtime:
        return await runtime.run(RunRequest(program=program, bindings=shop.bindings), **resume)


async def test_a_held_call_pauses_the_run_with_its_journal() -> None:
    shop = Shop()
    paused = await _run(shop, CHARGE_THEN_RECEIPT)
    assert paused.paused and not paused.ok and paused.error is None and not paused.has_value
    assert paused.logs == ["charging", "charged ch_1"]
    (held,) = paused.pending
    assert (held.name, held.args, held.seq) == ("tools.send_receipt", {"to": "a@example.com"}, 2)
    assert held.reason == "a person must approve the receipt to a@example.com"
    journal = paused.journal
    assert journal is not None and journal.pending == paused.pending
    assert held.call_id == f"{journal.run_id}:2"
    (charge,) = journal.calls
    assert (charge.seq, charge.name, msgspec.json.decode(charge.args)) == (
        1,
        "tools.charge",
        {"amount": 5},
    )
    assert msgspec.json.decode(charge.value) == {"id": "ch_1", "amount": 5}  # type: ignore[arg-type]
    assert journal.logs == 2 and journal.program == CHARGE_THEN_RECEIPT
    assert paused.to_json()["pending"][0]["call_id"] == held.call_id
    assert shop.executed == {"charge": 1, "send_receipt": 0}


async def test_a_resume_with_approval_executes_each_tool_once_in_all() -> None:
    shop = Shop()
    paused = await _run(shop, CHARGE_THEN_RECEIPT)
    assert paused.journal is not None
    journal = Journal.loads(paused.journal.dumps())  # as it would come back from a file
    done = await _run(
        shop, CHARGE_THEN_RECEIPT, resume=journal, decisions={paused.pending[0].call_id: "allow"}
    )
    assert done.ok and done.value == {
        "charge": {"id": "ch_1", "amount": 5},
        "receipt": "sent to a@example.com",
    }
    assert done.logs == ["receipt: sent to a@example.com"]  # the replay's lines are not repeated
    assert shop.executed == {"charge": 1, "send_receipt": 1}
    run_id = journal.run_id
    assert shop.call_ids == [f"{run_id}:1", f"{run_id}:2"]  # the same ids across the resume
    assert done.journal is not None and done.journal.run_id == run_id
    assert [c.seq for c in done.journal.calls] == [1, 2] and done.journal.pending == ()
    assert done.journal.logs == 3


async def test_a_resume_with_a_refusal_raises_in_the_program_and_repeats_nothing() -> None:
    shop = Shop()
    paused = await _run(shop, CHARGE_THEN_RECEIPT)
    call_id = paused.pending[0].call_id
    done = await _run(shop, CHARGE_THEN_RECEIPT, resume=paused.journal, decisions={call_id: "deny"})
    assert done.ok and done.value["receipt"] == "refused (DENIED)"
    assert shop.executed == {"charge": 1, "send_receipt": 0}
    assert shop.approved == [False]  # refused by the runtime: the binding was not asked again
    refused = done.journal.calls[-1]  # type: ignore[union-attr]
    assert refused.error is not None and refused.error.code == "DENIED"
    assert "refused when the run resumed" in refused.error.message


async def test_a_held_call_without_a_decision_is_asked_again() -> None:
    shop = Shop()
    paused = await _run(shop, CHARGE_THEN_RECEIPT)
    again = await _run(shop, CHARGE_THEN_RECEIPT, resume=paused.journal)
    assert again.paused and again.pending == paused.pending
    assert shop.executed == {"charge": 1, "send_receipt": 0} and shop.approved == [False, False]
    assert again.logs == []  # every line of it was a replay's


async def test_only_the_allowed_call_sees_approved() -> None:
    shop = Shop()
    paused = await _run(shop, CHARGE_THEN_RECEIPT)
    await _run(
        shop,
        CHARGE_THEN_RECEIPT,
        resume=paused.journal,
        decisions={paused.pending[0].call_id: "allow"},
    )
    assert shop.approved == [False, True]


async def test_a_gather_of_three_with_one_held_replays_each_call_once() -> None:
    shop = Shop()
    paused = await _run(shop, GATHER_THREE)
    assert paused.paused and [p.seq for p in paused.pending] == [2]
    assert paused.journal is not None
    # the calls executing when the hold came settle and are recorded; those issued after
    # it wait, and run (once) after the resume
    # (which of the two charges had started depends on how the calls reached the host)
    assert {c.seq for c in paused.journal.calls} <= {1, 3}
    assert shop.executed["charge"] == len(paused.journal.calls)
    done = await _run(
        shop, GATHER_THREE, resume=paused.journal, decisions={paused.pending[0].call_id: "allow"}
    )
    assert_the_gather_resumed_once_each(paused, done)
    assert shop.executed == {"charge": 2, "send_receipt": 1}


async def test_a_replay_answers_in_the_order_the_calls_settled() -> None:
    shop = Shop()
    paused = await _run(shop, SETTLE_ORDER)
    assert paused.paused and paused.journal is not None
    # the slow first charge (seq 1) settled after the fast one (seq 2) and its follow-up (3)
    assert [c.seq for c in paused.journal.calls] == [2, 3, 1, 4]
    done = await _run(
        shop, SETTLE_ORDER, resume=paused.journal, decisions={paused.pending[0].call_id: "allow"}
    )
    assert done.ok, done.error
    assert done.value == [[{"id": "ch_4", "amount": 10}, {"id": "ch_2", "amount": 20}], "sent to c"]
    assert shop.executed == {"charge": 4, "send_receipt": 1}


async def test_new_calls_after_a_hold_are_not_executed() -> None:
    shop = Shop()
    program = (
        "import asyncio\n"
        "t = asyncio.ensure_future(tools.send_receipt(to='x'))\n"
        "await asyncio.sleep(0.05)\n"
        "await tools.charge(amount=1)\n"
        "await t\n"
    )
    paused = await _run(shop, program)
    assert paused.paused and shop.executed == {"charge": 0, "send_receipt": 0}
    assert paused.journal is not None and paused.journal.calls == ()


async def test_a_different_call_at_a_recorded_step_diverges_naming_it() -> None:
    shop = Shop()
    paused = await _run(shop, CHARGE_THEN_RECEIPT)
    other = CHARGE_THEN_RECEIPT.replace("amount=5", "amount=7")
    request = RunRequest(program=other, bindings=shop.bindings)
    async with InProcessRuntime() as runtime:
        with pytest.raises(JournalError, match="another program"):
            await runtime.run(request, resume=paused.journal)
    # the same program text, but inputs that steer it elsewhere
    program = "charge = await tools.charge(amount=amount)\nawait tools.send_receipt(to='a')\n"
    async with InProcessRuntime() as runtime:
        first = await runtime.run(
            RunRequest(program=program, bindings=shop.bindings, inputs={"amount": 5})
        )
        assert first.journal is not None
        replayed = msgspec.structs.replace(first.journal, inputs_sha256=first.journal.inputs_sha256)
        with pytest.raises(JournalError, match="other inputs"):
            await runtime.run(
                RunRequest(program=program, bindings=shop.bindings, inputs={"amount": 6}),
                resume=replayed,
            )


async def _diverging(program: str, first_inputs: dict[str, Any], then: dict[str, Any]) -> RunResult:
    """Pause ``program`` with ``first_inputs``'s answers, resume it where its calls differ."""
    shop = Shop()
    async with InProcessRuntime() as runtime:
        paused = await runtime.run(
            RunRequest(program=program, bindings=shop.bindings, inputs=first_inputs)
        )
        assert paused.paused and paused.journal is not None
        journal = msgspec.structs.replace(paused.journal, inputs_sha256=_digest(then))
        return await runtime.run(
            RunRequest(program=program, bindings=shop.bindings, inputs=then),
            resume=journal,
            decisions={paused.pending[0].call_id: "allow"},
        )


def _digest(inputs: dict[str, Any]) -> str:
    from runtime._journal import inputs_digest

    return inputs_digest(inputs)


async def test_a_replay_that_asks_another_call_ends_replay_diverged() -> None:
    program = "await tools.charge(amount=n)\nawait tools.send_receipt(to='a')\nreturn 1\n"
    result = await _diverging(program, {"n": 5}, {"n": 6})
    assert result.error is not None and result.error.kind == "replay_diverged"
    assert result.error.message == (
        'the replay diverged at step 1: the journal has tools.charge({"amount":5}), the '
        'program asked tools.charge({"amount":6})'
    )
    assert "replay_diverged" in FAILURE_KINDS


async def test_a_replay_that_asks_another_held_call_diverges() -> None:
    program = "await tools.charge(amount=1)\nawait tools.send_receipt(to=who)\nreturn 1\n"
    result = await _diverging(program, {"who": "a"}, {"who": "b"})
    assert result.error is not None and result.error.kind == "replay_diverged"
    assert "step 2: the journal has tools.send_receipt" in result.error.message


async def test_a_replay_that_skips_the_held_call_diverges() -> None:
    program = (
        "await tools.charge(amount=1)\n"
        "if skip:\n    await tools.charge(amount=2)\n"
        "else:\n    await tools.send_receipt(to='a')\n"
        "return 1\n"
    )
    result = await _diverging(program, {"skip": False}, {"skip": True})
    assert result.error is not None and result.error.kind == "replay_diverged"
    assert result.error.message.startswith(
        "the replay diverged at step 2: the journal has tools.send_receipt"
    )


async def test_a_replay_that_ends_before_the_held_call_diverges() -> None:
    program = (
        "await tools.charge(amount=1)\nif stop:\n    return 0\nawait tools.send_receipt(to='a')\n"
    )
    result = await _diverging(program, {"stop": False}, {"stop": True})
    assert result.error is not None and result.error.kind == "replay_diverged"
    assert "ended without asking it" in result.error.message


async def test_decisions_must_name_held_calls() -> None:
    shop = Shop()
    paused = await _run(shop, CHARGE_THEN_RECEIPT)
    with pytest.raises(JournalError, match="no pending call 'nope'"):
        await _run(shop, CHARGE_THEN_RECEIPT, resume=paused.journal, decisions={"nope": "allow"})
    with pytest.raises(JournalError, match="'allow' or 'deny'"):
        await _run(
            shop,
            CHARGE_THEN_RECEIPT,
            resume=paused.journal,
            decisions={paused.pending[0].call_id: "yes"},
        )
    with pytest.raises(JournalError, match="'allow' or 'deny'"):
        await _run(
            shop,
            CHARGE_THEN_RECEIPT,
            resume=paused.journal,
            decisions={paused.pending[0].call_id: 1},
        )
    with pytest.raises(JournalError, match="for a resumed run"):
        await _run(shop, CHARGE_THEN_RECEIPT, decisions={"x": "allow"})
    with pytest.raises(JournalError, match="takes a Journal"):
        await _run(shop, CHARGE_THEN_RECEIPT, resume=paused.journal.dumps())  # type: ignore[union-attr]
    assert shop.executed == {"charge": 1, "send_receipt": 0}


async def test_a_request_run_id_must_be_the_journals() -> None:
    shop = Shop()
    paused = await _run(shop, CHARGE_THEN_RECEIPT)
    async with InProcessRuntime() as runtime:
        with pytest.raises(JournalError, match="run_id"):
            await runtime.run(
                RunRequest(program=CHARGE_THEN_RECEIPT, bindings=shop.bindings, run_id="other"),
                resume=paused.journal,
            )


async def test_a_journal_over_its_bound_fails_the_run_and_keeps_what_came_before() -> None:
    shop = Shop()
    program = "for i in range(10):\n    await tools.charge(amount=i, pad='x' * 40)\n"
    async with InProcessRuntime() as runtime:
        result = await runtime.run(
            RunRequest(
                program=program, bindings=shop.bindings, limits=Limits(max_journal_bytes=300)
            )
        )
    assert result.error is not None and result.error.kind == "output_limit"
    assert result.error.message.startswith("the journal passed max_journal_bytes (300): call ")
    assert result.journal is not None
    kept = [c.seq for c in result.journal.calls]
    assert kept == list(range(1, len(kept) + 1)) and 0 < len(kept) < 10
    assert result.journal.size <= 300
    assert f"call {len(kept) + 1} (tools.charge) would add" in result.error.message
    assert f"keeps the {len(kept)} calls before it" in result.error.message
    # here its arguments alone would pass the bound: it was not executed
    assert shop.executed["charge"] == len(kept)


async def test_a_call_whose_arguments_pass_the_bound_is_not_executed() -> None:
    shop = Shop()
    program = "await tools.charge(amount=1, pad='x' * 500)\n"
    async with InProcessRuntime() as runtime:
        result = await runtime.run(
            RunRequest(
                program=program, bindings=shop.bindings, limits=Limits(max_journal_bytes=300)
            )
        )
    assert result.error is not None and result.error.kind == "output_limit"
    assert shop.executed["charge"] == 0


async def test_every_result_carries_a_journal() -> None:
    async with InProcessRuntime() as runtime:
        for program in ("1 +", "return 1", "raise ValueError('x')"):
            result = await runtime.run(RunRequest(program=program))
            assert result.journal is not None and result.journal.calls == ()
            assert result.journal.pending == () and result.pending == ()


async def test_a_failed_run_can_be_resumed_without_repeating_its_calls() -> None:
    shop = Shop()
    program = (
        "c = await tools.charge(amount=1)\nif fail:\n    raise RuntimeError('boom')\nreturn c\n"
    )
    async with InProcessRuntime() as runtime:
        failed = await runtime.run(
            RunRequest(program=program, bindings=shop.bindings, inputs={"fail": True})
        )
        assert failed.error is not None and failed.journal is not None
        journal = msgspec.structs.replace(failed.journal, inputs_sha256=_digest({"fail": False}))
        done = await runtime.run(
            RunRequest(program=program, bindings=shop.bindings, inputs={"fail": False}),
            resume=journal,
        )
    assert done.value == {"id": "ch_1", "amount": 1} and shop.executed["charge"] == 1


async def test_on_log_sees_only_new_lines() -> None:
    shop = Shop()
    paused = await _run(shop, CHARGE_THEN_RECEIPT)
    seen: list[str] = []
    async with InProcessRuntime() as runtime:
        await runtime.run(
            RunRequest(program=CHARGE_THEN_RECEIPT, bindings=shop.bindings, on_log=seen.append),
            resume=paused.journal,
            decisions={paused.pending[0].call_id: "allow"},
        )
    assert seen == ["receipt: sent to a@example.com"]


async def test_a_binding_sees_its_call_info_with_approval() -> None:
    seen: list[Any] = []

    async def look(args: Any) -> None:
        seen.append(current_call.get())
        if len(seen) == 1:
            raise HoldCall("wait")

    program = "await tools.look()\n"
    async with InProcessRuntime() as runtime:
        paused = await runtime.run(RunRequest(program=program, bindings={"tools.look": look}))
        await runtime.run(
            RunRequest(program=program, bindings={"tools.look": look}),
            resume=paused.journal,
            decisions={paused.pending[0].call_id: "allow"},
        )
    assert [(i.seq, i.approved) for i in seen] == [(1, False), (1, True)]
    assert seen[0].run_id == seen[1].run_id


@pytest.mark.parametrize(
    ("decision", "receipt"), [(True, "sent to a@example.com"), (False, "refused (DENIED)")]
)
async def test_a_decision_may_be_a_bool(decision: bool, receipt: str) -> None:
    shop = Shop()
    paused = await _run(shop, CHARGE_THEN_RECEIPT)
    done = await _run(
        shop,
        CHARGE_THEN_RECEIPT,
        resume=paused.journal,
        decisions={paused.pending[0].call_id: decision},
    )
    assert done.value["receipt"] == receipt
