"""Code mode end to end on the real sandbox: what the fake runtime cannot show."""

from __future__ import annotations

import threading
import time
from collections.abc import AsyncIterator
from typing import Any

import anyio
import pytest

from host.codemode import DISPATCH_EVENT, CodeMode, CodeModeConfig
from host.sandbox import SubprocessRuntime
from host.tools import ToolRegistry, ToolsConfig, tool
from runtime import Limits
from tests.host.codemode.test_codemode import TOOLS

pytestmark = pytest.mark.anyio


@tool(concurrency_safe=True)
async def wait100() -> int:
    """Sleep 100 ms (safe to run in parallel)."""
    await anyio.sleep(0.1)
    return 100


@pytest.fixture(params=["async", "sync"])
async def setup(request: pytest.FixtureRequest) -> AsyncIterator[tuple[ToolRegistry, CodeMode]]:
    registry = ToolRegistry(ToolsConfig(mode="code"))
    for definition in [*TOOLS, wait100]:
        registry.register(definition)
    async with SubprocessRuntime() as runtime:
        config = CodeModeConfig(
            limits=Limits(compute_ms=5_000, max_wall_ms=20_000), call_style=request.param
        )
        yield registry, CodeMode(registry, runtime, config)


def _call(codemode: CodeMode, text: str) -> str:
    return f"await {text}" if codemode.config.call_style == "async" else text


async def test_run_code_in_a_child(setup: tuple[ToolRegistry, CodeMode]) -> None:
    _, codemode = setup
    result = await codemode.run(f"print('hi')\nreturn {_call(codemode, 'tools.add(a=2, b=3)')}")
    assert result.to_dict()["value"] == {"logs": ["hi"], "result": 5}
    failed = (await codemode.run("print('before')\nx = 1\n1 / 0")).to_dict()
    assert failed["meta"]["code_run"]["lineno"] == 3
    assert 'File "<program>", line 3' in failed["meta"]["code_run"]["traceback"]


async def test_a_builtin_exception_of_a_tool_is_raised_as_that_type(
    setup: tuple[ToolRegistry, CodeMode],
) -> None:
    _, codemode = setup
    program = (
        f"try:\n    {_call(codemode, 'tools.boom()')}\n"
        "except RuntimeError as e:\n    caught = [isinstance(e, ToolCallError), e.message]\n"
        "caught"
    )
    result = (await codemode.run(program)).to_dict()
    assert result["value"]["result"] == [True, "RuntimeError: boom went the tool"]


async def test_the_sdk_section_matches_the_call_style(
    setup: tuple[ToolRegistry, CodeMode],
) -> None:
    _, codemode = setup
    text = codemode.sdk().text
    if codemode.config.call_style == "async":
        assert "async def add(*, a: int, b: int) -> int" in text and "await tools." in text
    else:
        assert "\ndef add(*, a: int, b: int) -> int" in text and "no `await`" in text


async def test_ten_safe_calls_overlap(setup: tuple[ToolRegistry, CodeMode]) -> None:
    _, codemode = setup
    if codemode.config.call_style == "async":
        program = (
            "import asyncio\nreturn await asyncio.gather(*(tools.wait100() for _ in range(10)))"
        )
    else:
        program = (
            "from concurrent.futures import ThreadPoolExecutor\n"
            "with ThreadPoolExecutor(10) as pool:\n"
            "    return list(pool.map(lambda _: tools.wait100(), range(10)))\n"
        )
    start = time.monotonic()
    result = await codemode.run_program(program)
    assert result.value == [100] * 10, result.error
    assert time.monotonic() - start < 1.0  # overlapped (the benchmark holds it to 130 ms)


async def test_unfinished_calls_are_aborted_and_drained(
    setup: tuple[ToolRegistry, CodeMode],
) -> None:
    registry, codemode = setup
    if codemode.config.call_style == "sync":
        pytest.skip("a plain call cannot be left unfinished by its own thread")
    done: list[Any] = []
    registry.on(
        DISPATCH_EVENT,
        lambda p: done.append(
            (p["name"], p["result"].get("error", {}).get("info", {}).get("code"))
        ),
    )
    program = "import asyncio\nasyncio.ensure_future(tools.nap(ms=30000))\nawait asyncio.sleep(0.2)\nraise ValueError('give up')"
    with anyio.fail_after(10):
        result = await codemode.run_program(program)
    assert result.error is not None and result.error.kind == "exception"
    assert done == [("nap", "ABORTED")]  # published before run_program returned


async def test_a_code_mode_session_keeps_variables_between_run_code_calls(
    setup: tuple[ToolRegistry, CodeMode],
) -> None:
    _, codemode = setup
    async with codemode.session() as session:
        assert "persist" in session.sdk().text and "persist" not in codemode.sdk().text
        assert "persist" in session.model_tools()[0]["description"]
        first = await session.run(
            f"total = {_call(codemode, 'tools.add(a=2, b=3)')}\ndef twice(x):\n    return 2 * x"
        )
        assert first.is_error is False, first.to_dict()
        second = await session.run("return twice(total)")
        assert second.to_dict()["value"]["result"] == 10
        assert {"total", "twice"} <= set(session.names)
    outside = await codemode.run("return 'total' in globals()")
    assert outside.to_dict()["value"]["result"] is False


async def test_run_code_marks_a_bare_expressions_repr_and_a_session_may_keep_failed_names(
    setup: tuple[ToolRegistry, CodeMode],
) -> None:
    _, codemode = setup
    shown = (await codemode.run("{1, 2}")).to_dict()
    assert shown["value"] == {"logs": [], "result": "{1, 2}", "result_is_repr": True}
    assert shown["content"] == [{"type": "text", "text": "result (repr, not JSON):\n{1, 2}"}]
    plain = (await codemode.run("[1, 2]")).to_dict()
    assert plain["value"] == {"logs": [], "result": [1, 2]}
    async with codemode.session(commit_on_failure=True) as session:
        failed = await session.run("n = 3\nraise RuntimeError('late')")
        assert failed.is_error is True
        assert (await session.run("return n")).to_dict()["value"]["result"] == 3


_STUCK = threading.Event()


@tool
def stuck_sync_tool() -> int:
    """Block its thread until released (a sync tool that never returns in time)."""
    _STUCK.wait(20)
    return 1


async def test_a_stuck_sync_tool_cannot_hold_a_run_past_its_wall_budget() -> None:
    registry = ToolRegistry(ToolsConfig(mode="code"))
    registry.register(stuck_sync_tool)
    _STUCK.clear()
    try:
        async with SubprocessRuntime() as runtime:
            config = CodeModeConfig(limits=Limits(compute_ms=1_000, max_wall_ms=1_000))
            codemode = CodeMode(registry, runtime, config)
            started = time.monotonic()
            result = await codemode.run_program("return await tools.stuck_sync_tool()")
            took = time.monotonic() - started
    finally:
        _STUCK.set()  # let the abandoned thread end
    assert result.error is not None and result.error.kind == "budget", result.error
    assert took < 6, f"the run took {took:.1f} s under a 1 s wall budget"
