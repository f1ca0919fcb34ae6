"""host.mcp: MCP servers as bindings, dsh-code as an MCP server, and a FastMCP sandbox provider.

Importing this package is light: ``mcp`` and ``fastmcp`` are imported when first used
(install the ``mcp`` extra: ``pip install 'dsh-code[mcp]'``).
"""

from __future__ import annotations

import contextlib as _contextlib

from ._client import (
    McpServers,
    McpServerSpec,
    load_mcp_config,
    parse_mcp_option,
    require_mcp,
    result_value,
    tool_name,
)
from ._exceptions import McpConfigError, McpError, McpServerError, McpUnavailableError
from ._fastmcp import DshSandboxProvider
from ._schema import loosen_schema
from ._server import McpServeConfig, build_server, serve

__all__ = (
    "DshSandboxProvider",
    "McpConfigError",
    "McpError",
    "McpServeConfig",
    "McpServerError",
    "McpServerSpec",
    "McpServers",
    "McpUnavailableError",
    "build_server",
    "load_mcp_config",
    "loosen_schema",
    "parse_mcp_option",
    "require_mcp",
    "result_value",
    "serve",
    "tool_name",
)

for _name in __all__:
    _obj = globals()[_name]
    if isinstance(_obj, type) or callable(_obj):
        with _contextlib.suppress(AttributeError, TypeError):
            _obj.__module__ = __name__
del _name, _obj, _contextlib
