"""Regenerate the corpus of real MCP servers' tool lists: `python tests/host/tools/data/regen.py`.

Installs the pinned npm packages into a temporary folder, starts each server over stdio with
the `mcp` client, and writes its `tools/list` (name, title, description, inputSchema,
outputSchema, annotations: as the server sent them) to `mcp_<server>.json` beside this file.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import anyio

HERE = Path(__file__).resolve().parent
SERVERS = {
    "everything": ("@modelcontextprotocol/server-everything@2026.8.31", "mcp-server-everything"),
    "filesystem": ("@modelcontextprotocol/server-filesystem@2026.8.31", "mcp-server-filesystem"),
    "memory": ("@modelcontextprotocol/server-memory@2026.8.31", "mcp-server-memory"),
    "github": ("@modelcontextprotocol/server-github@2025.4.8", "mcp-server-github"),
}


async def _tools(command: str, args: list[str], env: dict[str, str]) -> list[dict[str, Any]]:
    from mcp import Client, StdioServerParameters
    from mcp.client.stdio import stdio_client

    params = StdioServerParameters(command=command, args=args, env=env)
    out: list[dict[str, Any]] = []
    async with Client(stdio_client(params), cache=None) as client:
        cursor: str | None = None
        while True:
            page = await client.list_tools(cursor=cursor)
            out.extend(
                tool.model_dump(by_alias=True, exclude_none=True, mode="json")
                for tool in page.tools
            )
            cursor = page.next_cursor
            if not cursor:
                return out


def main() -> None:
    """Install the servers, list their tools, write the JSON files."""
    with tempfile.TemporaryDirectory(prefix="mcp-corpus-") as tmp:
        packages = [package for package, _ in SERVERS.values()]
        subprocess.run(
            ["npm", "install", "--prefix", tmp, "--no-audit", "--no-fund", "--silent", *packages],
            check=True,
        )
        for name, (package, binary) in SERVERS.items():
            args = [tmp] if name == "filesystem" else []  # its allowed directory
            env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": tmp}
            if name == "memory":
                env["MEMORY_FILE_PATH"] = str(Path(tmp) / "memory.json")
            tools = anyio.run(_tools, str(Path(tmp) / "node_modules" / ".bin" / binary), args, env)
            tools.sort(key=lambda tool: tool["name"])
            text = json.dumps({"package": package, "tools": tools}, indent=1, ensure_ascii=False)
            (HERE / f"mcp_{name}.json").write_text(text + "\n", encoding="utf-8")
            print(f"{name}: {len(tools)} tools", file=sys.stderr)


if __name__ == "__main__":
    main()
