"""FastMCP's experimental ``CodeMode`` transform on dsh-code's runtime, through a real client."""

from __future__ import annotations

import functools
import json
import time
from collections.abc import AsyncIterator
from typing import Any

import anyio
import psutil
import pytest
from fastmcp import Client, FastMCP
from fastmcp.exceptions import ToolError
from fastmcp.experimental.transforms.code_mode import CodeMode, SandboxProvider

from host.adapters import shared_runtime
from host.mcp import DshSandboxProvider

pytestmark = [
    pytest.mark.timeout(60),
    pytest.mark.parametrize("anyio_backend", ["asyncio"]),  # FastMCP runs on asyncio
    pytest.mark.anyio,
]


@pytest.fixture
async def provider() -> AsyncIterator[DshSandboxProvider]:
    async with DshSandboxProvider() as provider:
        yield provider


def _server(provider: SandboxProvider) -> FastMCP[Any]:
    server: FastMCP[Any] = FastMCP("calc", transforms=[CodeMode(sandbox_provider=provider)])

    @server.tool
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    @server.tool
    def refuse(why: str) -> str:
        """Always fail."""
        raise ToolError(f"refused: {why}")

    return server


async def test_code_mode_runs_on_our_runtime_through_a_client(provider: DshSandboxProvider) -> None:
    async with Client(_server(provider)) as client:
        names = {tool.name for tool in await client.list_tools()}
        assert names == {"search", "get_schema", "execute"}  # the transform's own tools

        chained = await client.call_tool(
            "execute",
            {
                "code": (
                    "import asyncio\n"
                    "x = await call_tool('add', {'a': 2, 'b': 3})\n"
                    "ys = await asyncio.gather(*(call_tool('add', {'a': x['result'], 'b': i})"
                    " for i in range(3)))\n"
                    "return {'x': x['result'], 'ys': [y['result'] for y in ys]}"
                )
            },
        )
        assert chained.data == {"x": 5, "ys": [5, 6, 7]}

        caught = await client.call_tool(
            "execute",
            {
                "code": (
                    "try:\n"
                    "    await call_tool('refuse', {'why': 'policy'})\n"
                    "except ToolCallError as exc:\n"
                    "    return [exc.tool, exc.message]"
                )
            },
        )
        tool, message = json.loads(caught.content[0].text)
        assert tool == "call_tool" and "refused: policy" in message

        failed = await client.call_tool(
            "execute", {"code": "print('so far')\n\nraise KeyError('k')"}, raise_on_error=False
        )
        assert failed.is_error is True
        text = failed.content[0].text
        assert "the program failed (exception)" in text
        assert 'File "<program>", line 3' in text  # the program's own lines, prelude aside
        assert "so far" in text


async def test_inputs_become_globals_and_the_last_expression_is_the_result(
    provider: DshSandboxProvider,
) -> None:
    assert await provider.run("limit * 2", inputs={"limit": 21}) == 42
    assert await provider.run("x = 1") is None

    async def lookup(key: str, *, default: str = "?") -> str:
        return {"a": "alpha"}.get(key, default)

    out = await provider.run(
        "return [await lookup('a'), await lookup('b', default='none')]",
        external_functions={"lookup": lookup},
    )
    assert out == ["alpha", "none"]
    with pytest.raises(ToolError, match=r"\(parse\).*line 1"):
        await provider.run("def (", external_functions={"lookup": lookup})
    with pytest.raises(ValueError, match="not a plain identifier"):
        await provider.run("1", external_functions={"not-a-name": lookup})


async def test_it_satisfies_the_protocol() -> None:
    provider: SandboxProvider = DshSandboxProvider()  # mypy checks the protocol match
    assert callable(provider.run)


async def test_the_wall_clock_limit_kills_the_child(provider: DshSandboxProvider) -> None:
    server: FastMCP[Any] = FastMCP(
        "slow", transforms=[CodeMode(sandbox_provider=provider, wall_clock_timeout_secs=0.5)]
    )
    async with Client(server) as client:
        started = time.monotonic()
        slow = await client.call_tool(
            "execute", {"code": "import time\ntime.sleep(30)"}, raise_on_error=False
        )
        assert time.monotonic() - started < 10
        assert slow.is_error is True
        assert "wall-clock limit" in slow.content[0].text  # FastMCP's own message
        again = await client.call_tool("execute", {"code": "return 7"})
        assert again.content[0].text == "7"


def _children() -> set[int]:
    return {p.pid for p in psutil.Process().children(recursive=True)}


async def test_a_failed_call_reads_as_the_plain_message(provider: DshSandboxProvider) -> None:
    async with Client(_server(provider)) as client:
        caught = await client.call_tool(
            "execute",
            {
                "code": (
                    "try:\n"
                    "    await call_tool('no_such_tool', {})\n"
                    "except ToolCallError as exc:\n"
                    "    return [str(exc), exc.tool, exc.code, type(exc).__name__]"
                )
            },
        )
    assert json.loads(caught.content[0].text) == [
        "Unknown tool: no_such_tool",
        "call_tool",
        "UNKNOWN_TOOL",
        "ToolCallError",
    ]


async def test_a_builtin_exception_of_an_external_function_keeps_its_type(
    provider: DshSandboxProvider,
) -> None:
    async def lookup(key: str) -> str:
        return {"a": "alpha"}[key]

    out = await provider.run(
        "try:\n    await lookup('b')\nexcept KeyError as exc:\n"
        "    return [str(exc), exc.tool, isinstance(exc, ToolCallError), type(exc).__name__]",
        external_functions={"lookup": lookup},
    )
    assert out == ["'b'", "lookup", True, "KeyError"]


async def test_an_uncaught_failed_call_shows_only_the_programs_frames(
    provider: DshSandboxProvider,
) -> None:
    async with Client(_server(provider)) as client:
        with pytest.raises(ToolError) as caught:
            await client.call_tool(
                "execute", {"code": "x = 1\nawait call_tool('refuse', {'why': 'no'})"}
            )
    assert str(caught.value) == (
        "the program failed (exception): Traceback (most recent call last):\n"
        '  File "<program>", line 2, in <module>\n'
        "    await call_tool('refuse', {'why': 'no'})\n"
        "ToolCallError: call_tool('refuse') failed: refused: no"
    )


async def test_a_cancelled_external_function_cleans_up_with_awaits(
    provider: DshSandboxProvider,
) -> None:
    server: FastMCP[Any] = FastMCP(
        "hang", transforms=[CodeMode(sandbox_provider=provider, wall_clock_timeout_secs=1)]
    )
    started = anyio.Event()
    cleaned: list[str] = []

    @server.tool
    async def hang() -> str:
        started.set()
        try:
            await anyio.sleep_forever()
        finally:
            await anyio.sleep(0)  # a cleanup that awaits: cancelled again, it never ends
            await anyio.sleep(0.01)
            cleaned.append("done")
        return "never"

    async with Client(server) as client:
        failed = await client.call_tool(
            "execute", {"code": "await call_tool('hang', {})"}, raise_on_error=False
        )
    assert started.is_set()
    assert failed.is_error is True and "wall-clock limit" in failed.content[0].text
    assert cleaned == ["done"]  # before execute returned


async def test_a_short_wall_clock_limit_cannot_starve_the_cold_start(
    capfd: pytest.CaptureFixture[str],
) -> None:
    provider = DshSandboxProvider()
    server: FastMCP[Any] = FastMCP(
        "quick", transforms=[CodeMode(sandbox_provider=provider, wall_clock_timeout_secs=0.01)]
    )
    async with Client(server) as client:
        await client.call_tool("execute", {"code": "return 7"}, raise_on_error=False)  # times out
        # the start went on without the cancelled caller: the runtime is started, not reset
        runtime = await shared_runtime(max_concurrent_runs=provider.max_concurrent_runs)
        assert runtime.containment and runtime.isolation in ("namespaces", "process")
        outcomes: list[bool] = []
        for _ in range(100):
            result = await client.call_tool("execute", {"code": "return 7"}, raise_on_error=False)
            outcomes.append(not result.is_error)
            if outcomes[-1]:
                break
    assert outcomes[-1] is True, f"no run within the limit in {len(outcomes)} attempts"
    err = capfd.readouterr().err
    assert "Traceback" not in err and "BrokenPipeError" not in err


async def test_sixteen_runs_run_at_once() -> None:
    provider = DshSandboxProvider()
    arrived = 0
    everyone = anyio.Event()

    async def arrive() -> int:
        nonlocal arrived
        arrived += 1
        if arrived == 16:
            everyone.set()
        await everyone.wait()  # a barrier: with fewer than 16 runs at once it never opens
        return arrived

    with anyio.fail_after(60):
        async with anyio.create_task_group() as tg:
            for _ in range(16):
                tg.start_soon(
                    functools.partial(
                        provider.run, "return await arrive()", external_functions={"arrive": arrive}
                    )
                )
    assert arrived == 16
    with pytest.raises(ValueError, match="max_concurrent_runs"):
        DshSandboxProvider(max_concurrent_runs=0)
