"""A small stdio MCP server for the README: ``dsh-code run PROG --mcp "calc=python examples/mcp/calc_server.py"``."""

from __future__ import annotations

import statistics

from mcp.server.mcpserver import MCPServer
from mcp.types import ToolAnnotations
from pydantic import BaseModel

server = MCPServer("calc", log_level="ERROR")


class Stats(BaseModel):
    """Summary statistics of a list of numbers."""

    count: int
    mean: float
    median: float


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def add(a: float, b: float) -> float:
    """Add two numbers."""
    return a + b


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def stats(numbers: list[float]) -> Stats:
    """Count, mean and median of a non-empty list of numbers."""
    return Stats(
        count=len(numbers), mean=statistics.fmean(numbers), median=statistics.median(numbers)
    )


if __name__ == "__main__":
    server.run()
