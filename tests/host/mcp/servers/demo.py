"""A small stdio MCP server: typed tools with input and output schemas, an image, an error."""

from __future__ import annotations

import base64
import os
import sys
import warnings

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import CallToolResult, ImageContent, TextContent, ToolAnnotations
from pydantic import BaseModel

# A one-pixel PNG.
PIXEL = base64.b64encode(
    bytes.fromhex(
        "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
        "1f15c4890000000d4944415478da63f8cfc0f01f0005000201e2b4f6d9"
        "0000000049454e44ae426082"
    )
).decode()

server = MCPServer("demo", log_level="ERROR")


class Sum(BaseModel):
    """The sum of two numbers."""

    total: int
    terms: list[int]


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def add(a: int, b: int) -> Sum:
    """Add two integers."""
    return Sum(total=a + b, terms=[a, b])


@server.tool()
def echo(text: str, times: int = 1) -> str:
    """Repeat a text."""
    return " ".join([text] * times)


@server.tool()
def pixel() -> CallToolResult:
    """A one-pixel PNG with a caption."""
    return CallToolResult(
        content=[
            TextContent(type="text", text="a red pixel"),
            ImageContent(type="image", data=PIXEL, mime_type="image/png"),
        ]
    )


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def env_value(name: str) -> str:
    """The value of an environment variable of the server ('' when unset)."""
    return os.environ.get(name, "")


@server.tool()
def fail(reason: str) -> str:
    """Always fail with the given reason."""
    raise ToolError(f"failed on purpose: {reason}")


if __name__ == "__main__":
    warnings.simplefilter("ignore")
    if os.environ.get("DEMO_PIDFILE"):  # lets a test check the server is gone afterwards
        with open(os.environ["DEMO_PIDFILE"], "w") as pidfile:
            pidfile.write(str(os.getpid()))
    print("demo server starting", file=sys.stderr)
    server.run()
