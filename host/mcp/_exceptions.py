"""Exceptions raised by host.mcp, all under one base class (not the ``mcp`` SDK's ``MCPError``).

    McpError                   base; never raised itself
    ├── McpUnavailableError    the ``mcp`` package is not installed (also an ``ImportError``)
    ├── McpConfigError         a bad ``--mcp`` value or MCP config file (also a ``ValueError``)
    ├── McpServerError         an MCP server would not start or list its tools in time
    │                          (also a ``RuntimeError``)
    └── ApprovalUnavailable    an ``ask`` for a program's call could not be put to the MCP
                               client (no request, no elicitation, no answer): the call is
                               denied with this message

A failure of a running server's tool call is never raised: it is a ``ToolError`` inside the
tool pipeline (``TOOL_ERROR``, or ``TOOL_TIMEOUT``), so the program can catch it.
"""

from __future__ import annotations

__all__ = (
    "ApprovalUnavailable",
    "McpConfigError",
    "McpError",
    "McpServerError",
    "McpUnavailableError",
)


class McpError(Exception):
    """The base class of every exception raised by host.mcp."""


class McpUnavailableError(McpError, ImportError):
    """Raised when the ``mcp`` package is missing; the message names the extra to install."""


class McpConfigError(McpError, ValueError):
    """Raised for a bad ``--mcp`` value or config file (a usage error); nothing was started."""


class McpServerError(McpError, RuntimeError):
    """Raised when a server would not start or list its tools; the servers started are stopped."""


class ApprovalUnavailable(McpError):
    """Raised by the elicitation ask handler when nobody can be asked: the call is denied."""
