"""Regenerate the schema corpus: `python -m tests.host.tools.data.regen [--mcp]`.

Writes `pydantic_models.json` (the `model_json_schema()` of each model in `models.py`, with its
examples). With `--mcp` it also installs the pinned npm packages of four MCP servers into a
temporary folder, starts each over stdio with the `mcp` client, and writes its `tools/list`
(as the server sent it) to `mcp_<server>.json`. `openapi.json` is written by hand.
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


def _pydantic() -> None:
    from tests.host.tools.data.models import EXAMPLES, MODELS

    out = {
        name: {
            "schema": model.model_json_schema(),
            "valid": EXAMPLES[name]["valid"],
            "invalid": [list(pair) for pair in EXAMPLES[name]["invalid"]],
        }
        for name, model in sorted(MODELS.items())
    }
    text = json.dumps(out, indent=1, ensure_ascii=False, sort_keys=True)
    (HERE / "pydantic_models.json").write_text(text + "\n", encoding="utf-8")


def _mcp() -> None:
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


def main() -> None:
    """Write the corpus files (the MCP ones only with --mcp)."""
    _pydantic()
    if "--mcp" in sys.argv[1:]:
        _mcp()


if __name__ == "__main__":
    main()
