"""DshCodeToolset under pydantic-ai's real Agent, driven by FunctionModel, under asyncio.run."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from pydantic_ai import (
    Agent,
    DeferredToolRequests,
    DeferredToolResults,
    ModelRetry,
    RunContext,
    ToolDefinition,
)
from pydantic_ai.exceptions import (
    ApprovalRequired,
    CallDeferred,
    ToolFailed,
    UnexpectedModelBehavior,
)
from pydantic_ai.messages import (
    ModelMessage,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.toolsets import ExternalToolset, FunctionToolset

from host.adapters.pydantic_ai import DshCodeToolset
from runtime import Limits
from tests.host.adapters.support import children, left_behind

pytestmark = pytest.mark.timeout(120)

CALLS: list[str] = []


def _toolset() -> FunctionToolset[Any]:
    toolset: FunctionToolset[Any] = FunctionToolset()

    @toolset.tool_plain
    def add(a: int, b: int) -> int:
        """Add two integers."""
        CALLS.append(f"add({a}, {b})")
        return a + b

    @toolset.tool_plain
    def lookup(key: str) -> str:
        """Look a key up."""
        CALLS.append(f"lookup({key})")
        if key != "pi":
            raise ModelRetry(f"no such key: {key}")
        return "3.14159"

    @toolset.tool_plain(requires_approval=True)
    def delete(path: str) -> str:
        """Delete a file (a person approves each call)."""
        CALLS.append(f"delete({path})")
        return f"deleted {path}"

    return toolset


def _scripted(programs: list[str], seen: list[list[Any]]) -> FunctionModel:
    """A model that sends each program as a run_code call, then says what it got back."""

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        last = list(messages[-1].parts)
        seen.append(last)
        if programs:
            return ModelResponse(parts=[ToolCallPart("run_code", {"code": programs.pop(0)})])
        returns = [
            p.content for p in last if isinstance(p, ToolReturnPart) and p.outcome != "retried"
        ]
        return ModelResponse(parts=[TextPart(json.dumps(returns))])

    return FunctionModel(respond)


def _retried(parts: list[Any]) -> ToolReturnPart:
    """The retry the model was sent for a failed run_code (a ToolReturnPart, outcome retried)."""
    return next(p for p in parts if isinstance(p, ToolReturnPart) and p.outcome == "retried")


@pytest.fixture
def before() -> Iterator[set[int]]:
    CALLS.clear()
    pids = children()
    yield pids
    assert not left_behind(pids), "a process outlived the agent run's event loop"


def _run(agent: Agent[Any, Any], prompt: str | None = None, **kwargs: Any) -> Any:
    return asyncio.run(agent.run(prompt, **kwargs))


def test_two_steps_share_variables_and_call_tools_through_pydantic_ai(before: set[int]) -> None:
    seen: list[list[Any]] = []
    descriptions: list[str] = []
    programs = [
        "x = await tools.add(a=2, b=3)\nprint('x is', x)",
        "y = await tools.add(a=x, b=10)\nreturn [y, float(await tools.lookup(key='pi'))]",
    ]
    model = _scripted(programs, seen)
    inner: Callable[..., Any] = model.function  # type: ignore[assignment]

    def spy(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        descriptions.extend(t.description or "" for t in info.function_tools)
        return inner(messages, info)  # type: ignore[no-any-return]

    agent = Agent(FunctionModel(spy), toolsets=[DshCodeToolset(_toolset())])
    result = _run(agent, "compute")
    assert json.loads(result.output) == [{"logs": [], "result": [15, 3.14159]}]
    assert CALLS == ["add(2, 3)", "add(5, 10)", "lookup(pi)"]
    first = [p for p in seen[1] if isinstance(p, ToolReturnPart)]
    assert first[0].content == {"logs": ["x is 5"]}
    assert "async def add(*, a: int, b: int)" in descriptions[0]  # the SDK of the wrapped tools
    assert "async def lookup(*, key: str)" in descriptions[0]


def test_a_failure_is_a_retry_with_the_traceback_and_the_model_recovers(before: set[int]) -> None:
    seen: list[list[Any]] = []
    programs = [
        "print('so far')\n\nreturn await tools.lookup(key='tau')",
        "try:\n    await tools.lookup(key='tau')\nexcept ToolCallError as exc:\n"
        "    print(exc.tool, exc.code, exc.message)\nreturn await tools.lookup(key='pi')",
    ]
    agent = Agent(_scripted(programs, seen), toolsets=[DshCodeToolset(_toolset())])
    result = _run(agent, "find pi")
    retry = _retried(seen[1])
    text = str(retry.content)
    assert "the program failed" in text and 'File "<program>", line 3' in text
    assert "no such key: tau" in text and "so far" in text
    assert json.loads(result.output) == [
        {"logs": ["lookup TOOL_ERROR no such key: tau"], "result": "3.14159"}
    ]


def test_a_budget_overrun_is_reported_to_the_model(before: set[int]) -> None:
    seen: list[list[Any]] = []
    programs = ["while True:\n    pass", "return 'gave up'"]
    toolset = DshCodeToolset(_toolset(), limits=Limits(compute_ms=300))
    result = _run(Agent(_scripted(programs, seen), toolsets=[toolset]), "spin")
    retry = _retried(seen[1])
    assert "budget" in str(retry.content) and "compute" in str(retry.content)
    assert json.loads(result.output) == [{"logs": [], "result": "gave up"}]


def test_a_call_needing_approval_defers_run_code_and_runs_once_approved(before: set[int]) -> None:
    seen: list[list[Any]] = []
    programs = ["n = await tools.add(a=1, b=1)\nreturn await tools.delete(path=f'/tmp/{n}')"]
    agent = Agent(
        _scripted(programs, seen),
        toolsets=[DshCodeToolset(_toolset())],
        output_type=[str, DeferredToolRequests],
    )
    first = _run(agent, "delete it")
    assert isinstance(first.output, DeferredToolRequests)
    (pending,) = first.output.approvals
    assert pending.tool_name == "run_code"
    assert first.output.metadata[pending.tool_call_id] == {
        "calls": [{"tool": "delete", "args": {"path": "/tmp/2"}}]
    }
    assert CALLS == ["add(1, 1)"]  # stopped before the call a person has to approve
    approved = _run(
        agent,
        message_history=first.all_messages(),
        deferred_tool_results=DeferredToolResults(approvals={pending.tool_call_id: True}),
    )
    assert json.loads(approved.output) == [{"logs": [], "result": "deleted /tmp/2"}]
    # resumed by replay: the add before the approval is not called a second time
    assert CALLS == ["add(1, 1)", "delete(/tmp/2)"]


def test_a_denied_call_is_reported_to_the_model_and_the_program_not_run_again(
    before: set[int],
) -> None:
    seen: list[list[Any]] = []
    programs = [
        "try:\n    await tools.delete(path='/etc')\nexcept ToolCallError as exc:\n"
        "    return [exc.code, exc.message]"
    ]
    agent = Agent(
        _scripted(programs, seen),
        toolsets=[DshCodeToolset(_toolset())],
        output_type=[str, DeferredToolRequests],
    )
    first = _run(agent, "delete /etc")
    assert isinstance(first.output, DeferredToolRequests)
    (pending,) = first.output.approvals
    denied = _run(
        agent,
        message_history=first.all_messages(),
        deferred_tool_results=DeferredToolResults(approvals={pending.tool_call_id: False}),
    )
    assert "denied" in denied.output.lower()
    assert CALLS == []  # pydantic-ai answers the model itself: run_code does not run again


def test_each_agent_run_has_its_own_variables(before: set[int]) -> None:
    seen: list[list[Any]] = []
    programs = ["x = 1", "return 'x' in globals()"]
    agent = Agent(_scripted(programs, seen), toolsets=[DshCodeToolset(_toolset())])
    _run(agent, "one")
    programs.append("return 'x' in globals()")
    second = _run(agent, "two")
    assert json.loads(second.output) == [{"logs": [], "result": False}]


def test_charge_once_and_receipt_once_through_the_deferred_tool_flow(before: set[int]) -> None:
    from tests.durable import CHARGE_THEN_RECEIPT

    executed = {"charge": 0, "send_receipt": 0}
    toolset: FunctionToolset[Any] = FunctionToolset()

    @toolset.tool_plain
    def charge(amount: int) -> dict[str, Any]:
        """Charge an amount."""
        executed["charge"] += 1
        return {"id": f"ch_{executed['charge']}", "amount": amount}

    @toolset.tool_plain(requires_approval=True)
    def send_receipt(to: str) -> str:
        """Send the receipt (a person approves it)."""
        executed["send_receipt"] += 1
        return f"sent to {to}"

    seen: list[list[Any]] = []
    agent = Agent(
        _scripted([CHARGE_THEN_RECEIPT], seen),
        toolsets=[DshCodeToolset(toolset)],
        output_type=[str, DeferredToolRequests],
    )
    first = _run(agent, "charge and send the receipt")
    assert isinstance(first.output, DeferredToolRequests)
    (pending,) = first.output.approvals
    assert first.output.metadata[pending.tool_call_id] == {
        "calls": [{"tool": "send_receipt", "args": {"to": "a@example.com"}}]
    }
    assert executed == {"charge": 1, "send_receipt": 0}
    approved = _run(
        agent,
        message_history=first.all_messages(),
        deferred_tool_results=DeferredToolResults(approvals={pending.tool_call_id: True}),
    )
    assert json.loads(approved.output) == [
        {
            "logs": ["receipt: sent to a@example.com"],
            "result": {"charge": {"id": "ch_1", "amount": 5}, "receipt": "sent to a@example.com"},
        }
    ]
    assert executed == {"charge": 1, "send_receipt": 1}


def _parts(seen: list[list[Any]], index: int) -> list[ToolReturnPart]:
    return [p for p in seen[index] if isinstance(p, ToolReturnPart)]


def test_a_deferred_or_external_call_defers_run_code(before: set[int]) -> None:
    toolset: FunctionToolset[Any] = FunctionToolset()

    @toolset.tool_plain
    def ship(order: int) -> str:
        """Ship an order (a warehouse does it, later)."""
        CALLS.append(f"ship({order})")
        raise CallDeferred(metadata={"ticket": order})

    external = ExternalToolset(
        [ToolDefinition(name="ask", parameters_json_schema={"type": "object"}, kind="external")]
    )
    for program, kind, expected in [
        ("return await tools.ship(order=7)", "external", {"ticket": 7}),
        ("return await tools.ask()", "external", {}),
    ]:
        seen: list[list[Any]] = []
        agent = Agent(
            _scripted([program], seen),
            toolsets=[DshCodeToolset.over([toolset, external])],
            output_type=[str, DeferredToolRequests],
        )
        first = _run(agent, "go")
        assert isinstance(first.output, DeferredToolRequests)
        (pending,) = first.output.calls
        assert pending.tool_name == "run_code"
        assert first.output.kind(pending.tool_call_id) == kind
        metadata = first.output.metadata[pending.tool_call_id]
        assert {k: v for k, v in metadata.items() if k != "calls"} == expected
        assert metadata["calls"][0]["tool"] in ("ship", "ask")
        answered = _run(
            agent,
            message_history=first.all_messages(),
            deferred_tool_results=DeferredToolResults(calls={pending.tool_call_id: "done"}),
        )
        assert json.loads(answered.output) == ["done"]  # what the caller answered
    assert CALLS == ["ship(7)"]


def test_a_terminal_tool_failure_is_a_failed_run_code_not_a_retry(before: set[int]) -> None:
    toolset: FunctionToolset[Any] = FunctionToolset()

    @toolset.tool_plain
    def fetch(url: str) -> str:
        """Fetch a page."""
        raise ToolFailed(f"{url} is gone for good")

    seen: list[list[Any]] = []
    programs = ["return await tools.fetch(url='x')"]
    agent = Agent(_scripted(programs, seen), toolsets=[DshCodeToolset(toolset, max_retries=0)])
    _run(agent, "go")  # max_retries=0: a retry would end the run with UnexpectedModelBehavior
    (failed,) = _parts(seen, 1)
    assert failed.outcome == "failed"
    assert "x is gone for good" in str(failed.content)


def test_a_wrapped_tool_spends_its_own_retries_and_sees_its_real_retry_count(
    before: set[int],
) -> None:
    toolset: FunctionToolset[Any] = FunctionToolset()
    retries: list[tuple[int, int]] = []

    @toolset.tool(retries=2)
    def flaky(ctx: RunContext[Any]) -> str:
        """Fails until its third try."""
        retries.append((ctx.retry, ctx.max_retries))
        if ctx.retry < 2:
            raise ModelRetry("try again")
        return "ok"

    seen: list[list[Any]] = []
    programs = ["return await tools.flaky()"] * 3
    agent = Agent(_scripted(programs, seen), toolsets=[DshCodeToolset(toolset, max_retries=5)])
    assert json.loads(_run(agent, "go").output) == [{"logs": [], "result": "ok"}]
    assert retries == [(0, 2), (1, 2), (2, 2)]

    @toolset.tool(retries=1)
    def broken(ctx: RunContext[Any]) -> str:
        """Always asks for a retry."""
        raise ModelRetry("never")

    programs.extend(["return await tools.broken()"] * 3)
    agent = Agent(_scripted(programs, []), toolsets=[DshCodeToolset(toolset, max_retries=5)])
    with pytest.raises(UnexpectedModelBehavior, match="'broken' exceeded max retries count of 1"):
        _run(agent, "go")


def test_approval_metadata_is_kept_both_ways(before: set[int]) -> None:
    toolset: FunctionToolset[Any] = FunctionToolset()
    metadata_seen: list[Any] = []

    @toolset.tool
    def wipe(ctx: RunContext[Any], disk: str) -> str:
        """Wipe a disk (asks a person first)."""
        if not ctx.tool_call_approved:
            raise ApprovalRequired(metadata={"risk": "high", "disk": disk})
        metadata_seen.append(ctx.tool_call_metadata)
        return f"wiped {disk}"

    seen: list[list[Any]] = []
    agent = Agent(
        _scripted(["return await tools.wipe(disk='sdb')"], seen),
        toolsets=[DshCodeToolset(toolset)],
        output_type=[str, DeferredToolRequests],
    )
    first = _run(agent, "wipe")
    assert isinstance(first.output, DeferredToolRequests)
    (pending,) = first.output.approvals
    metadata = first.output.metadata[pending.tool_call_id]
    assert (metadata["risk"], metadata["disk"]) == ("high", "sdb")  # the tool's own
    assert metadata["calls"] == [
        {"tool": "wipe", "args": {"disk": "sdb"}, "metadata": {"risk": "high", "disk": "sdb"}}
    ]
    approved = _run(
        agent,
        message_history=first.all_messages(),
        deferred_tool_results=DeferredToolResults(
            approvals={pending.tool_call_id: True}, metadata={pending.tool_call_id: {"by": "ann"}}
        ),
    )
    assert json.loads(approved.output) == [{"logs": [], "result": "wiped sdb"}]
    assert metadata_seen == [{"by": "ann"}]


def test_a_bug_in_a_tool_reaches_the_caller_as_outside_code_mode(before: set[int]) -> None:
    toolset: FunctionToolset[Any] = FunctionToolset()

    @toolset.tool_plain
    def buggy(n: int) -> int:
        """Has a bug."""
        return n + "1"  # type: ignore[operator]

    programs = ["try:\n    await tools.buggy(n=1)\nexcept Exception:\n    pass\nreturn 'hid it'"]
    agent = Agent(_scripted(programs, []), toolsets=[DshCodeToolset(toolset)])
    with pytest.raises(TypeError, match="unsupported operand"):
        _run(agent, "go")


def test_the_sdk_keeps_the_tools_return_types() -> None:
    toolset: FunctionToolset[Any] = FunctionToolset()

    @toolset.tool_plain
    def ratio(a: int, b: int) -> float:
        """Divide."""
        return a / b

    descriptions: list[str] = []

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        descriptions.extend(t.description or "" for t in info.function_tools)
        return ModelResponse(parts=[TextPart("done")])

    _run(Agent(FunctionModel(respond), toolsets=[DshCodeToolset(toolset)]), "go")
    assert "async def ratio(*, a: int, b: int) -> float" in descriptions[0]


def test_a_session_of_runs_never_blocks_the_event_loop(before: set[int]) -> None:
    from blockbuster import blockbuster_ctx

    seen: list[list[Any]] = []
    programs = [
        "x = await tools.add(a=1, b=2)\nprint(x)",
        "return x + 1",
        "while True:\n    pass",  # killed at its budget
        "return [x, await tools.lookup(key='pi')]",
    ]
    toolset = DshCodeToolset(_toolset(), limits=Limits(compute_ms=300, max_wall_ms=20_000))
    agent = Agent(_scripted(programs, seen), toolsets=[toolset])

    async def main() -> Any:
        # Every blocking call on this loop raises (pydantic-ai's own suite runs this way):
        # the first run starts the shared runtime, the others take and replenish spares.
        with blockbuster_ctx():
            return await agent.run("go")

    result = asyncio.run(main())
    assert json.loads(result.output) == [{"logs": [], "result": [3, "3.14159"]}]
    assert "budget" in str(_retried(seen[3]).content)


def test_an_instrumented_agent_is_one_trace_with_our_spans_under_its_run_code_span(
    before: set[int],
) -> None:
    from pydantic_ai.models.instrumented import InstrumentationSettings

    from tests.host.telemetry.support import Recorded

    with Recorded() as recorded:
        instrument = InstrumentationSettings(tracer_provider=recorded.tracer_provider)
        model = _scripted(["return await tools.add(a=2, b=3)"], [])
        agent = Agent(model, toolsets=[DshCodeToolset(_toolset())])
        agent.instrument = instrument
        assert json.loads(_run(agent, "compute").output) == [{"logs": [], "result": 5}]
        spans = recorded.spans()
        run = recorded.run()
        (ours,) = recorded.children(run)
    assert len({s.context.trace_id for s in spans if s.context is not None}) == 1
    (framework,) = [s for s in spans if s.name == "execute_tool run_code"]
    assert framework.context is not None and run.parent is not None
    assert run.parent.span_id == framework.context.span_id
    assert ours.name == "execute_tool add"
    assert dict(ours.attributes or {})["gen_ai.tool.call.id"] == (
        f"{dict(run.attributes or {})['dsh_code.run.id']}:1"
    )
