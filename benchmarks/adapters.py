"""Measure the per-step overhead of each framework adapter against the framework's default.

One step is the smallest thing the framework does with code: smolagents' executor call
(`DshExecutor` vs `LocalPythonExecutor`), a langgraph-codeact `eval_fn` call (`dsh_eval_fn`
vs the exec-based `eval_fn` of langgraph-codeact's README), a pydantic-ai agent step that
calls `run_code` (vs one calling a plain in-process tool doing the same), FastMCP's
provider `run` with one `call_tool` (`DshSandboxProvider` vs `MontySandboxProvider`, when
pydantic-monty is installed). Each step updates a variable from the step before and calls
one tool. Prints p50 / p95 in ms over n steps after a warm-up; run from the repository
root: `python benchmarks/adapters.py [--steps N]`.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import io
import os
import statistics
import sys
import time
import warnings
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def _row(name: str, samples: list[float]) -> str:
    ordered = sorted(samples)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    return f"| {name} | {statistics.median(ordered):.2f} | {p95:.2f} | {len(ordered)} |"


def _timed(step: Callable[[], Any], n: int) -> list[float]:
    step()  # warm-up: the template starts, the session has state
    out = []
    for _ in range(n):
        started = time.perf_counter()
        step()
        out.append((time.perf_counter() - started) * 1000)
    return out


async def _atimed(step: Callable[[], Awaitable[Any]], n: int) -> list[float]:
    await step()
    out = []
    for _ in range(n):
        started = time.perf_counter()
        await step()
        out.append((time.perf_counter() - started) * 1000)
    return out


def smolagents_rows(n: int) -> list[str]:
    from smolagents import tool
    from smolagents.local_python_executor import LocalPythonExecutor

    from host.adapters.smolagents import DshExecutor

    @tool  # type: ignore[untyped-decorator]
    def add(a: int, b: int) -> int:
        """Add.

        Args:
            a: first
            b: second
        """
        return a + b

    code = "x = add(x, 1)"
    rows = []
    local = LocalPythonExecutor([])
    local.send_tools({"add": add})
    local.send_variables({"x": 0})
    rows.append(_row("smolagents LocalPythonExecutor", _timed(lambda: local(code), n)))
    ours = DshExecutor()
    ours.send_tools({"add": add})
    ours.send_variables({"x": 0})
    try:
        rows.append(_row("smolagents DshExecutor", _timed(lambda: ours(code), n)))
    finally:
        ours.cleanup()
    return rows


def _exec_eval_fn(code: str, context: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """langgraph-codeact's README sandbox: exec in-process, stdout captured."""
    before = set(context)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(code, context)
    return out.getvalue(), {k: v for k, v in context.items() if k not in before}


def langgraph_rows(n: int) -> list[str]:
    from host.adapters.langgraph import dsh_eval_fn

    def add(a: int, b: int) -> int:
        return a + b

    code = "x = add(x, 1)"
    context: dict[str, Any] = {"add": add, "x": 0}
    rows = [_row("langgraph exec eval_fn", _timed(lambda: _exec_eval_fn(code, dict(context)), n))]

    async def main() -> list[float]:
        eval_fn = dsh_eval_fn()
        state = {"add": add, "x": 0}

        async def step() -> None:
            _, new = await eval_fn(code, state)
            state.update(new)

        return await _atimed(step, n)

    rows.append(_row("langgraph dsh_eval_fn", asyncio.run(main())))
    return rows


def pydantic_ai_rows(n: int) -> list[str]:
    from pydantic_ai import Agent
    from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart
    from pydantic_ai.models.function import FunctionModel
    from pydantic_ai.toolsets import FunctionToolset
    from pydantic_ai.usage import UsageLimits

    from host.adapters.pydantic_ai import DshCodeToolset

    def agent_with(tool: str, args: dict[str, Any], toolset: Any) -> Agent[Any, Any]:
        def respond(messages: list[Any], info: Any) -> ModelResponse:
            calls = sum(1 for m in messages for p in m.parts if getattr(p, "tool_name", None))
            if calls // 2 < n:  # each call has a call part and a return part
                return ModelResponse(parts=[ToolCallPart(tool, args)])
            return ModelResponse(parts=[TextPart("done")])

        return Agent(FunctionModel(respond), toolsets=[toolset])

    def tools() -> FunctionToolset[Any]:
        toolset: FunctionToolset[Any] = FunctionToolset()

        @toolset.tool_plain
        def add(a: int, b: int) -> int:
            """Add."""
            return a + b

        return toolset

    async def run(agent: Agent[Any, Any]) -> float:
        started = time.perf_counter()
        await agent.run("go", usage_limits=UsageLimits(request_limit=n + 5))
        return (time.perf_counter() - started) * 1000 / n

    plain = agent_with("add", {"a": 1, "b": 1}, tools())
    code = "x = globals().get('x', 0)\nx = await tools.add(a=x, b=1)"
    ours = agent_with("run_code", {"code": code}, DshCodeToolset(tools()))

    async def main() -> tuple[list[float], list[float]]:
        await run(ours)  # warm-up
        a = [await run(plain) for _ in range(3)]
        b = [await run(ours) for _ in range(3)]
        return a, b

    a, b = asyncio.run(main())
    return [
        _row(f"pydantic-ai step, plain tool (mean of {n} steps)", a),
        _row(f"pydantic-ai step, DshCodeToolset run_code (mean of {n} steps)", b),
    ]


def fastmcp_rows(n: int) -> list[str]:
    from fastmcp.experimental.transforms.code_mode import MontySandboxProvider

    from benchmarks._peers import monty
    from host.mcp import DshSandboxProvider

    async def call_tool(name: str, params: dict[str, Any]) -> Any:
        return {"result": params["a"] + 1}

    code = "return await call_tool('add', {'a': a})"
    rows = []

    async def main(provider: Any) -> list[float]:
        return await _atimed(
            lambda: provider.run(
                code, inputs={"a": 1}, external_functions={"call_tool": call_tool}
            ),
            n,
        )

    if monty() is None:
        rows.append("| FastMCP MontySandboxProvider | not installed | | |")
    else:
        rows.append(_row("FastMCP MontySandboxProvider", asyncio.run(main(MontySandboxProvider()))))
    rows.append(_row("FastMCP DshSandboxProvider", asyncio.run(main(DshSandboxProvider()))))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=50)
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    print(f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores\n")
    print("| step | p50 ms | p95 ms | n |\n|---|---|---|---|")
    for rows in (smolagents_rows, langgraph_rows, pydantic_ai_rows, fastmcp_rows):
        for row in rows(args.steps):
            print(row, flush=True)
    print(f"\nload average {os.getloadavg()[0]:.2f} at the end")


if __name__ == "__main__":
    main()
