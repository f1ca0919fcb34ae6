"""Exceptions raised by host.tools, all under one base class.

    ToolsError                      base; never raised itself
    ├── ToolDefinitionError         a tool or schema definition is malformed (at definition time)
    │   └── ReservedToolNameError   a definition, shadow, mask or removal targets ``run_code``
    ├── ScopeError                  an agent-only operation was called on an ordinary scope
    ├── SchemaError                 a value or JSON Schema cannot be expressed in the schema model
    └── ToolError                   raised BY a tool body to fail with a chosen code and content

Tool calls never raise these: every failure of an invocation is a failure ``ToolResult``
(a ``ToolError`` from a body becomes one, with its code). Each leaves the registry usable.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = (
    "ReservedToolNameError",
    "SchemaError",
    "ScopeError",
    "ToolDefinitionError",
    "ToolError",
    "ToolsError",
)


class ToolsError(Exception):
    """The base class of every exception raised by host.tools."""


class ToolDefinitionError(ToolsError):
    """Raised when a tool definition or its schema is malformed; nothing was registered."""


class ReservedToolNameError(ToolDefinitionError):
    """Raised when code tries to register, shadow, restrict or remove the reserved ``run_code``."""


class ScopeError(ToolsError):
    """Raised when ``restrict`` or ``present_as`` is called on an ordinary (non-agent) scope."""


class SchemaError(ToolsError):
    """Raised when a JSON Schema or a type hint cannot be expressed in the schema model."""


class ToolError(ToolsError):
    """Raised by a tool body to fail with ``code`` (an ``ErrorCode`` value), not ``TOOL_ERROR``.

    ``content`` (default ``Error: <message>``), ``meta`` and ``name`` go into the result.
    """

    def __init__(
        self,
        message: str,
        *,
        code: str = "TOOL_ERROR",
        name: str | None = None,
        content: Any = None,
        meta: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.code = code
        self.name = name
        self.content = content
        self.meta = meta
