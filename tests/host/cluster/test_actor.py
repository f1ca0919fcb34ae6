"""NodeActor driven directly, without Ray: batches, Started, exchanges, aborts, refusals."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import msgspec
import pytest

from host.cluster import _actor
from host.cluster._actor import NodeActor
from host.cluster._wire import (
    Answer,
    CallOut,
    Event,
    Finished,
    Held,
    Logs,
    Refusal,
    Refused,
    Started,
    Submission,
    decode_events,
    encode,
    encode_request,
)
from runtime import RunRequest

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    """A node's actor runs on Ray's asyncio loop."""
    return "asyncio"


@pytest.fixture
async def actor() -> AsyncIterator[NodeActor]:
    node = NodeActor(msgspec.json.encode({"prefork": 0}))
    await node._runtime.start()  # as ready() does
    try:
        yield node
    finally:
        await node.close()


async def _nothing(args: Any) -> Any:
    return None


async def _drive(actor: NodeActor, run_id: int, request: RunRequest) -> list[list[Event]]:
    """Every batch of one run, answering each call with ``{"echo": args}`` (or refusing
    the binding named ``refused``) in the next exchange."""
    batches = []
    data = await actor.start(run_id, encode_request(request, progress=False))
    while True:
        batch = decode_events(data)
        batches.append(batch)
        if isinstance(batch[-1], Finished | Refused):
            return batches
        replies: list[Answer | Refusal] = [
            Refusal(id=e.id, tool=e.name, message="no", code="DENIED")
            if e.name == "refused"
            else Refusal(
                id=e.id, tool=e.name, message="gone", code="TOOL_ERROR", exception_type="KeyError"
            )
            if e.name == "missing"
            else Answer(id=e.id, value={"echo": e.args})
            for e in batch
            if isinstance(e, CallOut)
        ]
        data = await actor.exchange(run_id, encode(replies))


async def test_a_short_run_is_one_batch(actor: NodeActor, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_actor, "STARTED_AFTER_S", 60.0)  # however slow the machine is
    batches = await _drive(actor, 1, RunRequest(program="return 6 * 7"))
    assert len(batches) == 1
    started, finished = batches[0]
    assert started == Started()
    assert isinstance(finished, Finished) and finished.result.value == 42
    assert finished.result.logs == []


async def test_a_long_run_says_started_on_its_own_then_finishes(actor: NodeActor) -> None:
    request = RunRequest(program="import time\nwhile True:\n    time.sleep(0.01)")
    first = await actor.start(1, encode_request(request, progress=False))
    assert decode_events(first) == [Started()]  # nothing else to send with it
    await actor.abort(1)
    last = decode_events(await actor.exchange(1, encode([])))
    finished = last[-1]
    assert isinstance(finished, Finished) and finished.result.error is not None
    assert finished.result.error.kind == "aborted"
    assert actor._runs == {}  # its last batch handed out: forgotten


async def test_calls_go_out_in_order_with_the_lines_before_them(actor: NodeActor) -> None:
    program = "print('a')\nx = await f(n=1)\nprint('b')\ntry:\n    await refused()\n"
    program += "except ToolCallError as exc:\n    return [x, exc.code]"
    request = RunRequest(program=program, bindings={"f": _nothing, "refused": _nothing})
    events = [e for batch in await _drive(actor, 1, request) for e in batch]
    kinds = [type(e).__name__ for e in events]
    assert kinds[0] == "Started"
    assert kinds.index("Logs") < kinds.index("CallOut")
    lines = [line for e in events if isinstance(e, Logs) for line in e.lines]
    assert lines == ["a", "b"]
    finished = events[-1]
    assert isinstance(finished, Finished)
    assert finished.result.value == [{"echo": {"n": 1}}, "DENIED"]
    assert finished.result.logs == []  # the lines came as Logs


async def test_a_refusal_for_a_builtin_exception_is_raised_as_that_type(actor: NodeActor) -> None:
    program = "try:\n    await missing()\nexcept KeyError as exc:\n"
    program += "    return [isinstance(exc, ToolCallError), exc.message]"
    request = RunRequest(program=program, bindings={"missing": _nothing})
    finished = (await _drive(actor, 1, request))[-1][-1]
    assert isinstance(finished, Finished)
    assert finished.result.value == [True, "gone"]


async def test_an_abort_that_comes_before_its_run_still_aborts_it(actor: NodeActor) -> None:
    await actor.abort(7)
    batches = await _drive(actor, 7, RunRequest(program="import time\ntime.sleep(30)"))
    finished = batches[-1][-1]
    assert isinstance(finished, Finished) and finished.result.error is not None
    assert finished.result.error.kind == "aborted"


async def test_late_replies_and_unknown_runs_are_dropped(actor: NodeActor) -> None:
    await actor.reply(99, encode([Answer(id=1, value=1)]))
    await actor.reply(99, b"not json")
    batches = await _drive(actor, 1, RunRequest(program="return 1"))
    await actor.reply(1, encode([Answer(id=1, value=1)]))
    assert isinstance(batches[-1][-1], Finished)


async def test_a_submission_this_node_cannot_read_is_refused(actor: NodeActor) -> None:
    submission = encode(Submission(fields={"program": "1", "future_field": 1}, bindings=[]))
    assert decode_events(await actor.start(1, submission)) == [
        Refused(
            message="RunRequest field 'future_field' is unknown to this node's dsh-code "
            "(another version?)",
            node_trouble=False,
        )
    ]
    assert actor._runs == {}


async def test_an_exchange_for_no_run_fails_that_call_only(actor: NodeActor) -> None:
    with pytest.raises(RuntimeError, match="no run 5 waiting"):
        await actor.exchange(5, encode([]))
    batches = await _drive(actor, 6, RunRequest(program="return 6"))
    assert isinstance(batches[-1][-1], Finished)


async def test_replies_that_come_alone_reach_the_waiting_call(actor: NodeActor) -> None:
    request = RunRequest(program="return await f(x=1)", bindings={"f": _nothing})
    batch = decode_events(await actor.start(1, encode_request(request, progress=False)))
    while not isinstance(batch[-1], CallOut):  # `Started` may come alone first
        batch = decode_events(await actor.exchange(1, encode([])))
    call = batch[-1]
    waiting = asyncio.ensure_future(actor.exchange(1, encode([])))  # waits: nothing to say
    await asyncio.sleep(0.05)
    assert not waiting.done()
    await actor.reply(1, encode([Answer(id=call.id, value="here")]))
    last = decode_events(await waiting)
    assert isinstance(last[-1], Finished) and last[-1].result.value == "here"


async def test_the_actor_going_away_ends_its_runs(actor: NodeActor) -> None:
    request = RunRequest(program="import time\ntime.sleep(30)")
    assert decode_events(await actor.start(1, encode_request(request, progress=False))) == [
        Started()
    ]
    waiting = asyncio.ensure_future(actor.exchange(1, encode([])))
    await asyncio.sleep(0.05)
    waiting.cancel()  # as when Ray cancels the call: the run is aborted, its child gone
    with pytest.raises(asyncio.CancelledError):
        await waiting
    assert actor._runs == {}
    batches = await _drive(actor, 2, RunRequest(program="return 2"))
    assert isinstance(batches[-1][-1], Finished)


async def _drive_held(
    actor: NodeActor, run_id: int, submission: bytes, hold: bool
) -> tuple[list[CallOut], Finished]:
    """One run: ``charge`` answered, ``send_receipt`` held (``hold``) or answered."""
    calls: list[CallOut] = []
    data = await actor.start(run_id, submission)
    while True:
        batch = decode_events(data)
        if isinstance(batch[-1], Finished):
            return calls, batch[-1]
        replies: list[Answer | Refusal | Held] = []
        for event in batch:
            if isinstance(event, CallOut):
                calls.append(event)
                if event.name == "tools.send_receipt" and hold:
                    replies.append(Held(id=event.id, reason="wait for a person"))
                else:
                    replies.append(Answer(id=event.id, value=f"{event.name} done"))
        data = await actor.exchange(run_id, encode(replies))


async def test_a_held_call_pauses_the_node_run_and_a_resume_replays_it_there(
    actor: NodeActor,
) -> None:
    program = "a = await tools.charge(amount=1)\nb = await tools.send_receipt()\nreturn [a, b]\n"
    request = RunRequest(
        program=program,
        bindings={"tools.charge": _nothing, "tools.send_receipt": _nothing},
        run_id="r7",
    )
    calls, finished = await _drive_held(actor, 1, encode_request(request, progress=False), True)
    assert [(c.id, c.name, c.approved) for c in calls] == [
        (1, "tools.charge", False),
        (2, "tools.send_receipt", False),
    ]
    paused = finished.result
    assert paused.paused and paused.journal is not None and paused.journal.run_id == "r7"
    assert [(p.call_id, p.reason) for p in paused.pending] == [("r7:2", "wait for a person")]
    submission = encode_request(
        request, progress=False, resume=paused.journal, decisions={"r7:2": "allow"}
    )
    calls, finished = await _drive_held(actor, 2, submission, False)
    # the charge was answered on the node, from the journal; the held call comes allowed
    assert [(c.id, c.name, c.approved) for c in calls] == [(2, "tools.send_receipt", True)]
    assert finished.result.value == ["tools.charge done", "tools.send_receipt done"]


async def test_a_run_joins_the_callers_trace_and_leaves_the_calls_to_it(actor: NodeActor) -> None:
    from host.telemetry import trace_carrier
    from tests.host.telemetry.support import Recorded

    with Recorded() as recorded:
        tracer = recorded.tracer_provider.get_tracer("caller")
        with tracer.start_as_current_span("the caller's run") as caller:
            carrier = trace_carrier()
        request = RunRequest(program="return await f(n=1)", bindings={"f": _nothing})
        data = await actor.start(1, encode_request(request, progress=False, trace=carrier))
        while not isinstance(decode_events(data)[-1], Finished):
            calls = [e for e in decode_events(data) if isinstance(e, CallOut)]
            data = await actor.exchange(1, encode([Answer(id=c.id, value=c.id) for c in calls]))
        run = recorded.run()
        assert run.parent is not None
        assert run.parent.span_id == caller.get_span_context().span_id
        assert run.context is not None
        assert run.context.trace_id == caller.get_span_context().trace_id
        assert recorded.children(run) == []  # the caller traces the call it answers
