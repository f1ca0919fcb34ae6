"""pydantic-ai's agent with dsh-code's code mode: one run_code tool over a toolset (offline)."""

from typing import Any

from pydantic_ai import (
    Agent,
    ModelMessage,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.toolsets import FunctionToolset

from dsh_code import DshCodeToolset, Limits

tools = FunctionToolset()


@tools.tool_plain
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def scripted(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """Stands in for a real model, e.g. Agent("openai:gpt-4o", ...)."""
    if len(messages) == 1:  # the question: answer it with one program
        program = "total = await tools.add(a=2, b=3)\ntotal * 10"
        return ModelResponse(parts=[ToolCallPart("run_code", {"code": program})])
    returned = messages[-1].parts[0]
    assert isinstance(returned, ToolReturnPart)
    output: Any = returned.content  # run_code's {"logs": [...], "result": ...}
    return ModelResponse(parts=[TextPart(f"It is {output['result']}.")])


toolset = DshCodeToolset(tools, limits=Limits(compute_ms=10_000))
agent = Agent(FunctionModel(scripted), toolsets=[toolset])
print(agent.run_sync("What is 2 + 3, times 10? Use run_code.").output)  # prints: It is 50.
