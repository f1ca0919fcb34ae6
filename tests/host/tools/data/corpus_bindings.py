"""A bindings file: every corpus MCP tool registered with define_tool, schemas verbatim."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from host.tools import ToolRunContext, define_tool

HERE = Path(__file__).parent


def _execute(args: Any, ctx: ToolRunContext) -> Any:
    return None


for _path in sorted(HERE.glob("mcp_*.json")):
    _server = _path.stem.removeprefix("mcp_")
    for _tool in json.loads(_path.read_text(encoding="utf-8"))["tools"]:
        _name = f"{_server}__{_tool['name']}"
        _output = {"schema": _tool["outputSchema"]} if "outputSchema" in _tool else None
        globals()[_name] = define_tool(
            name=_name,
            description=_tool.get("description", ""),
            parameters=_tool["inputSchema"],
            output=_output,
            execute=_execute,
        )
