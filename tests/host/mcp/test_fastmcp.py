"""FastMCP's experimental ``CodeMode`` transform on dsh-code's runtime, through a real client."""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest
from fastmcp import Client, FastMCP
from fastmcp.exceptions import ToolError
from fastmcp.experimental.transforms.code_mode import CodeMode, SandboxProvider

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
