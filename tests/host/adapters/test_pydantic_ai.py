"""DshCodeToolset under pydantic-ai's real Agent, driven by FunctionModel, under asyncio.run."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from pydantic_ai import Agent, DeferredToolRequests, DeferredToolResults, ModelRetry
from pydantic_ai.messages import (
    ModelMessage,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.toolsets import FunctionToolset

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
    assert CALLS == ["add(1, 1)", "add(1, 1)", "delete(/tmp/2)"]  # the program ran again


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
