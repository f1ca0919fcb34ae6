"""Call ``dsh-code mcp``'s ``run_code`` with the MCP SDK's client, over stdio.

``python examples/mcp/stdio_client.py PROGRAM [ARGS...]``: starts ``dsh-code mcp ARGS`` (the
``dsh-code`` beside this Python, else the one on PATH) as a subprocess, runs PROGRAM through ``run_code``, prints the run's
text and exits 1 if the run failed.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import anyio
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client


async def main(program: str, args: list[str]) -> bool:
    """Run one program through ``run_code``; print its text; whether it succeeded."""
    beside = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])
    command = shutil.which("dsh-code", path=beside) or "dsh-code"
    server = StdioServerParameters(command=command, args=["mcp", *args])
    async with Client(stdio_client(server)) as client:
        result = await client.call_tool("run_code", {"code": program})
        for part in result.content:
            print(getattr(part, "text", part))
        return not result.is_error


if __name__ == "__main__":
    if len(sys.argv) < 2:
        raise SystemExit(__doc__)
    sys.exit(0 if anyio.run(main, sys.argv[1], sys.argv[2:]) else 1)
