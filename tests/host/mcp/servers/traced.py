"""A stdio MCP server with one tool: the trace context its request carried in ``_meta``."""

from __future__ import annotations

import warnings

from mcp.server.mcpserver import Context, MCPServer

server = MCPServer("traced", log_level="ERROR")


@server.tool()
def traceparent(ctx: Context) -> str:
    """The W3C traceparent of this request's _meta ('' without one)."""
    meta = ctx.request_context.meta or {}
    return str(meta.get("traceparent", ""))


if __name__ == "__main__":
    warnings.simplefilter("ignore")
    server.run()
