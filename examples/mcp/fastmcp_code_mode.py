"""FastMCP's experimental CodeMode transform running its programs on dsh-code's runtime.

Run with ``python examples/mcp/fastmcp_code_mode.py``: it builds a FastMCP server whose
tools collapse into ``search``/``get_schema``/``execute``, and calls ``execute`` through
an in-memory FastMCP client.
"""

from __future__ import annotations

from typing import Any

import anyio
from fastmcp import Client, FastMCP
from fastmcp.experimental.transforms.code_mode import CodeMode

from dsh_code import DshSandboxProvider, Limits

PROGRAM = """
import asyncio
sums = await asyncio.gather(*(call_tool("add", {"a": i, "b": i}) for i in range(5)))
return [s["result"] for s in sums]
"""


async def main() -> None:
    """Serve two tools behind CodeMode and run one program through a client."""
    async with DshSandboxProvider(limits=Limits(compute_ms=5_000)) as provider:
        server: FastMCP[Any] = FastMCP("calc", transforms=[CodeMode(sandbox_provider=provider)])

        @server.tool
        def add(a: int, b: int) -> int:
            """Add two integers."""
            return a + b

        async with Client(server) as client:
            print([tool.name for tool in await client.list_tools()])
            result = await client.call_tool("execute", {"code": PROGRAM})
            print(result.content[0].text)  # [0,2,4,6,8]


if __name__ == "__main__":
    anyio.run(main)
