"""host.mcp: MCP servers as bindings, dsh-code as an MCP server, and a FastMCP sandbox provider.

Importing this package is light: ``mcp`` and ``fastmcp`` are imported when first used
(install the ``mcp`` extra: ``pip install 'dsh-code[mcp]'``).
"""

from __future__ import annotations

from runtime.lowlevel import fixup_module_metadata

from ._approvals import ApprovalUnavailable, elicitation_ask_handler
from ._client import (
    McpConfigError,
    McpServerError,
    McpServers,
    McpServerSpec,
    McpUnavailableError,
    load_mcp_config,
    parse_mcp_option,
    require_mcp,
    result_value,
    tool_name,
)
from ._fastmcp import DshSandboxProvider
from ._schema import loosen_schema
from ._server import McpServeConfig, build_server, serve

__all__ = (
    "ApprovalUnavailable",
    "DshSandboxProvider",
    "McpConfigError",
    "McpServeConfig",
    "McpServerError",
    "McpServerSpec",
    "McpServers",
    "McpUnavailableError",
    "build_server",
    "elicitation_ask_handler",
    "load_mcp_config",
    "loosen_schema",
    "parse_mcp_option",
    "require_mcp",
    "result_value",
    "serve",
    "tool_name",
)

fixup_module_metadata(__name__, globals())
