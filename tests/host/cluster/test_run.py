"""ClusterRun with a fake node: calls and replies, overrides, refusals, lost and silent nodes."""

from __future__ import annotations

import collections
import concurrent.futures
from collections.abc import Callable
from typing import Any

import anyio
import msgspec
import pytest

from host.cluster import ClusterRunStats
from host.cluster._pool import Node
from host.cluster._ray import NodeRecord
from host.cluster._run import ClusterRun, NotStarted
from host.cluster._wire import (
    Answer,
    CallOut,
    Event,
    Finished,
    Logs,
    NodeInfo,
    Progress,
    Refusal,
    Refused,
    Reply,
    Started,
    decode_replies,
    encode,
    forwarded_fields,
)
from runtime import RunError, RunRequest, RunResult, RunStats, RuntimeUsageError

pytestmark = pytest.mark.anyio

_STATS = RunStats(isolation="namespaces", compute_ms=1.0, wall_ms=2.0, calls=0, dropped_frames=0)


class FakeActor:
    """The node's side, driven by the test: batches to hand out, replies and aborts seen."""

    def __init__(self) -> None:
        self.waiting: collections.deque[concurrent.futures.Future[bytes]] = collections.deque()
        self.queued: collections.deque[bytes | Exception] = collections.deque()
        self.replies: list[Reply] = []
        self.reply_messages = 0  # exchanges and replies that carried at least one reply
        self.replied = anyio.Event()
        self.aborts = 0
        self.aborted = anyio.Event()
        self.pings = 0
        self.answer_pings = True
        self.submission = b""

    def request(self) -> concurrent.futures.Future[bytes]:
        future: concurrent.futures.Future[bytes] = concurrent.futures.Future()
        if self.queued:
            _resolve(future, self.queued.popleft())
        else:
            self.waiting.append(future)
        return future

    def push(self, item: bytes | Exception) -> None:
        if self.waiting:
            _resolve(self.waiting.popleft(), item)
        else:
            self.queued.append(item)

    def got_replies(self, data: bytes) -> None:
        replies = decode_replies(data)
        if replies:
            self.replies.extend(replies)
            self.reply_messages += 1
            self.replied.set()

    def batch(self, *events: Event) -> None:
        self.push(encode(list(events)))

    def fail(self, exc: Exception) -> None:
        self.push(exc)

    def finish(self, result: RunResult | None = None, *, started: bool = False) -> None:
        events: list[Event] = [Started()] if started else []
        events.append(Finished(result=result or RunResult(logs=[], value=1, stats=_STATS)))
        self.batch(*events)


def _resolve(future: concurrent.futures.Future[bytes], item: bytes | Exception) -> None:
    if isinstance(item, Exception):
        future.set_exception(item)
    else:
        future.set_result(item)


class FakeBackend:
    def start(
        self, actor: FakeActor, run_id: int, submission: bytes
    ) -> concurrent.futures.Future[bytes]:
        actor.submission = submission
        return actor.request()

    def exchange(
        self, actor: FakeActor, run_id: int, replies: bytes
    ) -> concurrent.futures.Future[bytes]:
        actor.got_replies(replies)
        return actor.request()

    def reply(self, actor: FakeActor, run_id: int, replies: bytes) -> None:
        actor.got_replies(replies)

    def abort(self, actor: FakeActor, run_id: int) -> None:
        actor.aborts += 1
        actor.aborted.set()

    def is_task_error(self, exc: BaseException) -> bool:
        return isinstance(exc, ArithmeticError)  # stands for Ray's RayTaskError here

    def ping(self, actor: FakeActor) -> concurrent.futures.Future[bytes]:
        actor.pings += 1
        future: concurrent.futures.Future[bytes] = concurrent.futures.Future()
        if actor.answer_pings:
            future.set_result(b"")
        return future


def _node(actor: FakeActor) -> Node:
    record = NodeRecord(node_id="ab" * 28, address="10.0.0.7", host="seven", alive=True)
    node = Node(record, actor, concurrent.futures.Future())
    node.info = NodeInfo(
        protocol=1,
        fields=list(forwarded_fields()),
        node_id=record.node_id,
        host="seven",
        address="10.0.0.7",
        pid=7,
        isolation="namespaces",
        why_not_namespaces="",
        cgroups=[],
        max_concurrent_runs=8,
    )
    return node


async def _run(
    request: RunRequest,
    drive: Callable[[FakeActor], Any],
    *,
    unresponsive_s: float = 15.0,
) -> tuple[RunResult | NotStarted, FakeActor, ClusterRun]:
    """Execute one run while ``drive`` plays the node."""
    actor = FakeActor()
    run = ClusterRun(
        request,
        _node(actor),
        FakeBackend(),  # type: ignore[arg-type]
        1,
        unresponsive_s=unresponsive_s,
    )
    out: list[RunResult | NotStarted] = []

    async def execute() -> None:
        out.append(await run.execute())

    with anyio.fail_after(20):
        async with anyio.create_task_group() as tg:
            tg.start_soon(execute)
            await drive(actor)
    return out[0], actor, run


async def test_a_call_is_answered_by_the_callers_binding() -> None:
    seen: list[Any] = []

    async def add(args: Any) -> int:
        seen.append(args)
        return int(args["a"]) + int(args["b"])

    async def drive(actor: FakeActor) -> None:
        actor.batch(
            Started(), Logs(lines=["before"]), CallOut(id=1, name="add", args={"a": 2, "b": 3})
        )
        await actor.replied.wait()
        actor.batch(Logs(lines=["after"]))
        actor.finish(RunResult(logs=[], value=5, stats=_STATS))

    lines: list[str] = []
    request = RunRequest(program="...", bindings={"add": add}, on_log=lines.append)
    result, actor, run = await _run(request, drive)
    assert isinstance(result, RunResult)
    assert actor.replies == [Answer(id=1, value=5)]
    assert seen == [{"a": 2, "b": 3}]
    assert result.value == 5 and result.logs == ["before", "after"] == lines
    assert isinstance(result.stats, ClusterRunStats)
    assert result.stats.node == "ab" * 28 and result.stats.retried_from is None
    assert run.lost_node is None
    submitted = msgspec.json.decode(actor.submission)
    assert submitted["bindings"] == ["add"] and submitted["progress"] is False


async def test_a_failing_binding_is_a_refusal_an_unknown_name_unknown_tool_sent_together() -> None:
    class Denied(Exception):
        code = "DENIED"
        tool = "tools.rm"
        message = "not allowed"

    async def deny(args: Any) -> Any:
        raise Denied()

    async def look(args: Any) -> Any:
        return dict[str, int]()["k"]

    async def drive(actor: FakeActor) -> None:
        actor.batch(
            CallOut(id=1, name="deny", args={}),
            CallOut(id=2, name="nope", args={}),
            CallOut(id=3, name="look", args={}),
        )
        await actor.replied.wait()
        actor.finish()

    request = RunRequest(program="...", bindings={"deny": deny, "look": look})
    result, actor, _ = await _run(request, drive)
    assert sorted(actor.replies, key=lambda r: r.id) == [
        Refusal(id=1, tool="tools.rm", message="not allowed", code="DENIED"),
        Refusal(id=2, tool="nope", message="no binding named 'nope'", code="UNKNOWN_TOOL"),
        Refusal(id=3, tool="look", message="'k'", code="TOOL_ERROR", exception_type="KeyError"),
    ]
    assert actor.reply_messages == 1  # answered at once: together, with the next exchange
    assert isinstance(result, RunResult) and result.ok


async def test_a_bad_binding_value_settles_the_run_here_as_invalid_completion() -> None:
    async def bad(args: Any) -> Any:
        return {"x": {1, 2}}

    async def drive(actor: FakeActor) -> None:
        actor.batch(Started(), CallOut(id=1, name="bad", args={}))
        await actor.aborted.wait()  # no reply: the caller asks the node to stop instead
        actor.finish(
            RunResult(
                logs=[],
                error=RunError(kind="aborted", message="the run was aborted by the caller"),
                stats=_STATS,
            )
        )

    result, actor, _ = await _run(RunRequest(program="...", bindings={"bad": bad}), drive)
    assert actor.replies == []
    assert isinstance(result, RunResult) and result.error is not None
    assert result.error.kind == "invalid_completion"
    assert (
        result.error.message == "binding bad returned a value that is not lossless JSON: set at $.x"
    )


async def test_a_node_lost_before_started_is_not_started_after_it_is_died() -> None:
    async def early(actor: FakeActor) -> None:
        actor.fail(ConnectionError("the actor is unavailable"))

    result, _, run = await _run(RunRequest(program="..."), early)
    assert result == NotStarted("ConnectionError: the actor is unavailable")
    assert run.lost_node == "ConnectionError: the actor is unavailable"

    async def late(actor: FakeActor) -> None:
        actor.batch(Started(), Logs(lines=["working"]))
        actor.fail(ConnectionError("the actor is unavailable"))

    result, _, run = await _run(RunRequest(program="..."), late)
    assert isinstance(result, RunResult) and result.error is not None
    assert result.error.kind == "died"
    assert "10.0.0.7 (node abababababab)" in result.error.message
    assert result.error.message.endswith("ConnectionError: the actor is unavailable")
    assert result.logs == ["working"]
    assert run.lost_node is not None

    async def raised(actor: FakeActor) -> None:
        actor.batch(Started())
        actor.fail(ZeroDivisionError("a bug in the actor"))

    result, _, run = await _run(RunRequest(program="..."), raised)
    assert isinstance(result, RunResult) and result.error is not None
    assert result.error.kind == "died"
    assert "the node's actor failed: ZeroDivisionError: a bug in the actor" in result.error.message
    assert run.lost_node is None  # only this run failed there: the node stays in use

    async def garbage(actor: FakeActor) -> None:
        actor.push(b"[[1, 2]")

    result, _, _ = await _run(RunRequest(program="..."), garbage)
    assert isinstance(result, RunResult) and result.error is not None
    assert result.error.kind == "died" and "unreadable" in result.error.message


async def test_refusals() -> None:
    async def trouble(actor: FakeActor) -> None:
        actor.batch(Started(), Refused(message="the template did not start", node_trouble=True))

    result, _, run = await _run(RunRequest(program="..."), trouble)
    assert result == NotStarted("the template did not start")  # another node may do
    assert run.lost_node is not None

    actor = FakeActor()
    run = ClusterRun(
        RunRequest(program="..."),
        _node(actor),
        FakeBackend(),  # type: ignore[arg-type]
        1,
        unresponsive_s=5.0,
    )
    actor.batch(Refused(message="RunRequest field 'x' is unknown", node_trouble=False))
    with pytest.raises(RuntimeUsageError, match="field 'x' is unknown"):
        await run.execute()  # the caller broke the contract: raised, as locally


async def test_a_silent_node_that_does_not_answer_a_ping_is_lost() -> None:
    async def silent(actor: FakeActor) -> None:
        actor.answer_pings = False
        actor.batch(Started())

    result, actor, _ = await _run(RunRequest(program="..."), silent, unresponsive_s=0.3)
    assert isinstance(result, RunResult) and result.error is not None
    assert result.error.kind == "died"
    assert "did not answer a ping within 0.3 s" in result.error.message
    assert actor.pings >= 1

    async def quiet_but_alive(actor: FakeActor) -> None:
        actor.batch(Started())
        with anyio.fail_after(5):
            while actor.pings < 2:
                await anyio.sleep(0.01)
        actor.finish()

    result, _, _ = await _run(RunRequest(program="..."), quiet_but_alive, unresponsive_s=0.3)
    assert isinstance(result, RunResult) and result.ok


async def test_the_callers_cancellation_aborts_on_the_node_and_waits_for_it() -> None:
    actor = FakeActor()
    run = ClusterRun(
        RunRequest(program="..."),
        _node(actor),
        FakeBackend(),  # type: ignore[arg-type]
        1,
        unresponsive_s=5.0,
    )
    actor.batch(Started())
    out: list[RunResult | NotStarted] = []

    async def node_side() -> None:
        await actor.aborted.wait()
        await anyio.sleep(0.1)  # the node takes a moment to end the run
        actor.batch(Logs(lines=["last words"]))
        actor.finish(
            RunResult(
                logs=[],
                error=RunError(kind="aborted", message="the run was aborted by the caller"),
                stats=_STATS,
            )
        )

    async with anyio.create_task_group() as tg:
        tg.start_soon(node_side)
        with anyio.move_on_after(0.2):
            out.append(await run.execute())
    result = out[0]
    assert isinstance(result, RunResult) and result.error is not None
    assert result.error.kind == "aborted"
    assert result.error.message == "the caller cancelled the run"
    assert result.logs == ["last words"]  # read on to the end
    assert actor.aborts == 1


async def test_a_cancelled_run_whose_node_is_lost_is_aborted_not_retried() -> None:
    actor = FakeActor()
    run = ClusterRun(
        RunRequest(program="..."),
        _node(actor),
        FakeBackend(),  # type: ignore[arg-type]
        1,
        unresponsive_s=5.0,
    )
    out: list[RunResult | NotStarted] = []

    async def node_side() -> None:
        await actor.aborted.wait()
        actor.fail(ConnectionError("gone"))

    async with anyio.create_task_group() as tg:
        tg.start_soon(node_side)
        with anyio.move_on_after(0.1):
            out.append(await run.execute())
    result = out[0]
    assert isinstance(result, RunResult) and result.error is not None
    assert result.error.kind == "aborted"
    assert run.lost_node == "ConnectionError: gone"


async def test_progress_reaches_on_progress_with_the_node_and_observer_bugs_are_swallowed() -> None:
    reports: list[RunStats] = []

    def on_progress(stats: RunStats) -> None:
        reports.append(stats)
        raise RuntimeError("observer bug")

    def on_log(line: str) -> None:
        raise RuntimeError("observer bug")

    async def drive(actor: FakeActor) -> None:
        actor.batch(Started(), Progress(stats=_STATS), Logs(lines=["x"]))
        actor.finish()

    request = RunRequest(program="...", on_progress=on_progress, on_log=on_log)
    result, actor, _ = await _run(request, drive)
    assert isinstance(result, RunResult) and result.ok and result.logs == ["x"]
    assert len(reports) == 1 and isinstance(reports[0], ClusterRunStats)
    assert reports[0].node == "ab" * 28 and reports[0].compute_ms == 1.0
    assert msgspec.json.decode(actor.submission)["progress"] is True


async def test_a_slow_call_holds_back_neither_the_next_batch_nor_its_reply() -> None:
    release = anyio.Event()
    lines: list[str] = []

    async def slow(args: Any) -> str:
        await release.wait()
        return "done"

    async def drive(actor: FakeActor) -> None:
        actor.batch(Started(), CallOut(id=1, name="slow", args={}))
        actor.batch(Logs(lines=["while waiting"]))  # fetched while the call still runs
        with anyio.fail_after(5):
            while lines != ["while waiting"]:
                await anyio.sleep(0.001)
        assert actor.replies == []
        release.set()
        await actor.replied.wait()  # alone, as soon as it is ready: an exchange is waiting
        actor.finish()

    request = RunRequest(program="...", bindings={"slow": slow}, on_log=lines.append)
    result, actor, _ = await _run(request, drive)
    assert isinstance(result, RunResult) and result.ok
    assert actor.replies == [Answer(id=1, value="done")] and actor.reply_messages == 1
