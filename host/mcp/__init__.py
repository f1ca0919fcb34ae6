"""host.mcp: MCP servers as bindings, dsh-code as an MCP server, and a FastMCP sandbox provider.

Importing this package is light: ``mcp`` and ``fastmcp`` are imported when first used
(install the ``mcp`` extra: ``pip install 'dsh-code[mcp]'``).
"""

from __future__ import annotations

from runtime.lowlevel import fixup_module_metadata as _fixup_module_metadata

from ._approvals import elicitation_ask_handler
from ._client import (
    McpServers,
    McpServerSpec,
    load_mcp_config,
    parse_mcp_option,
    require_mcp,
    result_value,
    tool_name,
)
from ._config import McpServeConfig
from ._exceptions import (
    ApprovalUnavailable,
    McpConfigError,
    McpError,
    McpServerError,
    McpUnavailableError,
)
from ._fastmcp import DshSandboxProvider
from ._schema import loosen_schema
from ._server import build_server, serve

__all__ = (
    "ApprovalUnavailable",
    "DshSandboxProvider",
    "McpConfigError",
    "McpError",
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

_fixup_module_metadata(__name__, globals())
