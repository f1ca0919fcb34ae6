"""dsh_eval_fn under langgraph-codeact's real graph, driven by a LangChain fake chat model."""

from __future__ import annotations

import asyncio
import warnings
from collections.abc import Iterator
from typing import Any

import pytest

with warnings.catch_warnings():  # langgraph 0.3 warns about a langchain default on import
    import langchain_core  # noqa: F401  # first: its import puts its own filters in front

    warnings.simplefilter("ignore")
    from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
    from langchain_core.messages import AIMessage
    from langgraph.checkpoint.memory import MemorySaver
    from langgraph_codeact import create_codeact

from host.adapters.langgraph import dsh_eval_fn
from tests.host.adapters.support import children, left_behind

pytestmark = pytest.mark.timeout(120)

CALLS: list[str] = []


def add(a: int, b: int) -> int:
    """Add two integers."""
    CALLS.append(f"add({a}, {b})")
    return a + b


def lookup(key: str) -> str:
    """Look a key up."""
    CALLS.append(f"lookup({key})")
    if key != "pi":
        raise KeyError(f"no such key: {key}")
    return "3.14159"


def _model(*replies: str) -> GenericFakeChatModel:
    return GenericFakeChatModel(messages=iter([AIMessage(content=text) for text in replies]))


def _code(source: str) -> str:
    return f"Let me run this.\n```python\n{source}\n```"


@pytest.fixture
def before() -> Iterator[set[int]]:
    CALLS.clear()
    pids = children()
    yield pids
    assert not left_behind(pids), "a process outlived the eval_fn"


async def _ainvoke(model: GenericFakeChatModel, eval_fn: Any, prompt: str) -> dict[str, Any]:
    graph = create_codeact(model, [add, lookup], eval_fn).compile(checkpointer=MemorySaver())
    config = {"configurable": {"thread_id": "t"}}
    state: dict[str, Any] = await graph.ainvoke(
        {"messages": [{"role": "user", "content": prompt}]}, config=config
    )
    return state


def _texts(state: dict[str, Any]) -> list[str]:
    return [str(m.content) for m in state["messages"]]


def test_two_steps_share_variables_and_call_tools_on_the_host(before: set[int]) -> None:
    model = _model(
        _code("import math\nx = add(2, 3)\nprint('x is', x)"),
        _code("y = add(x, b=10)\nprint(y, lookup('pi'), math.floor(2.5))"),
        "The answer is 15.",
    )

    async def main() -> dict[str, Any]:
        eval_fn = dsh_eval_fn()
        try:
            return await _ainvoke(model, eval_fn, "compute")
        finally:
            await eval_fn.aclose()  # type: ignore[attr-defined]

    state = asyncio.run(main())
    texts = _texts(state)
    assert texts[2] == "x is 5\n" and texts[4] == "15 3.14159 2\n"
    assert CALLS == ["add(2, 3)", "add(5, 10)", "lookup(pi)"]
    # the returned locals: the scripts' JSON variables, carried in the graph's state
    assert {k: v for k, v in state["context"].items() if not callable(v)} == {"x": 5, "y": 15}


def test_a_tool_failure_reaches_the_model_and_it_recovers(before: set[int]) -> None:
    model = _model(
        _code("print('before')\nlookup('tau')"),
        _code(
            "try:\n    lookup('tau')\nexcept ToolCallError as exc:\n    print('caught', exc.code)"
        ),
        "Done.",
    )

    async def main() -> dict[str, Any]:
        return await _ainvoke(model, dsh_eval_fn(), "find")  # closed with the loop

    texts = _texts(asyncio.run(main()))
    assert texts[2].startswith("before\nError during execution: Traceback")
    assert 'File "<program>", line 2' in texts[2] and "no such key: tau" in texts[2]
    assert texts[4] == "caught TOOL_ERROR\n"


def test_a_budget_overrun_is_reported_to_the_model(before: set[int]) -> None:
    model = _model(_code("while True:\n    pass"), _code("print('next')"), "Stopped.")

    async def main() -> dict[str, Any]:
        return await _ainvoke(model, dsh_eval_fn(compute_ms=300), "spin")

    texts = _texts(asyncio.run(main()))
    assert "Error during execution: budget" in texts[2] and "compute" in texts[2]
    assert texts[4] == "next\n"


def test_a_blocking_eval_fn_for_invoke(before: set[int]) -> None:
    model = _model(_code("x = add(1, 2)"), _code("print(x * 2)"), "Six.")
    eval_fn = dsh_eval_fn(blocking=True)
    graph = create_codeact(model, [add], eval_fn).compile(checkpointer=MemorySaver())
    state = graph.invoke(
        {"messages": [{"role": "user", "content": "go"}]},
        config={"configurable": {"thread_id": "b"}},
    )
    assert _texts(state)[2] == "<code ran, no output printed to stdout>"
    assert _texts(state)[4] == "6\n"
    eval_fn.close()  # type: ignore[attr-defined]


def test_variables_from_the_context_seed_the_run(before: set[int]) -> None:
    async def main() -> tuple[str, dict[str, Any]]:
        eval_fn = dsh_eval_fn()
        out: tuple[str, dict[str, Any]] = await eval_fn(
            "print(limit + 1)\nlimit = limit * 2", {"limit": 20, "add": add}
        )
        return out

    output, new_vars = asyncio.run(main())
    assert output == "21\n" and new_vars == {"limit": 40}


def test_an_eval_fn_without_tools_runs_and_a_tools_builtin_exception_keeps_its_type(
    before: set[int],
) -> None:
    async def main() -> tuple[Any, Any]:
        eval_fn = dsh_eval_fn()
        try:
            bare = await eval_fn("x = 6\nprint(x * 7)", {})
            caught = await eval_fn(
                "try:\n    lookup('tau')\nexcept KeyError as exc:\n"
                "    print('caught', isinstance(exc, ToolCallError), exc.tool)",
                {"lookup": lookup},
            )
            return bare, caught
        finally:
            await eval_fn.aclose()  # type: ignore[attr-defined]

    bare, caught = asyncio.run(main())
    assert bare == ("42\n", {"x": 6})
    assert caught[0] == "caught True lookup\n"


def test_steps_never_block_the_callers_event_loop(before: set[int]) -> None:
    from blockbuster import blockbuster_ctx

    async def main() -> list[str]:
        eval_fn = dsh_eval_fn(max_wall_ms=20_000)
        try:
            with blockbuster_ctx():  # every blocking call on this loop raises
                outputs = []
                for code in ("x = add(1, 2)\nprint(x)", "print(x + 1)", "print(lookup('pi'))"):
                    text, _ = await eval_fn(code, {"add": add, "lookup": lookup})
                    outputs.append(text)
                return outputs
        finally:
            await eval_fn.aclose()  # type: ignore[attr-defined]

    assert asyncio.run(main()) == ["3\n", "4\n", "3.14159\n"]
