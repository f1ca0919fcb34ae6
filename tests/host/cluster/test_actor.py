"""NodeActor driven directly, without Ray: batches, Started, replies, aborts, refusals."""

from __future__ import annotations

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
    the binding named ``refused``)."""
    batches = []
    async for data in actor.run(run_id, encode_request(request, progress=False)):
        batch = decode_events(data)
        batches.append(batch)
        for event in batch:
            if isinstance(event, CallOut):
                reply: Answer | Refusal = (
                    Refusal(id=event.id, tool=event.name, message="no", code="DENIED")
                    if event.name == "refused"
                    else Answer(id=event.id, value={"echo": event.args})
                )
                await actor.reply(run_id, encode([reply]))
    return batches


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
    stream = actor.run(1, encode_request(request, progress=False))
    assert decode_events(await anext(stream)) == [Started()]  # nothing else to send with it
    await actor.abort(1)
    rest = [decode_events(data) async for data in stream]
    finished = rest[-1][-1]
    assert isinstance(finished, Finished) and finished.result.error is not None
    assert finished.result.error.kind == "aborted"


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
    batches = [decode_events(data) async for data in actor.run(1, submission)]
    assert batches == [
        [
            Refused(
                message="RunRequest field 'future_field' is unknown to this node's dsh-code "
                "(another version?)",
                node_trouble=False,
            )
        ]
    ]


async def test_a_dropped_stream_ends_the_run(actor: NodeActor) -> None:
    stream = actor.run(
        1, encode_request(RunRequest(program="import time\ntime.sleep(30)"), progress=False)
    )
    assert decode_events(await anext(stream)) == [Started()]
    await stream.aclose()  # the caller went away: the run is aborted, its child gone
    assert actor._runs == {}
    batches = await _drive(actor, 2, RunRequest(program="return 2"))
    assert isinstance(batches[-1][-1], Finished)
