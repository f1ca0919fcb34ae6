"""The CLI's MCP plumbing: ``--mcp``/``--mcp-config`` servers as tools, and ``dsh-code mcp``."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Final

import typer

if TYPE_CHECKING:
    from host.mcp import McpServers, McpServerSpec
    from host.tools import ToolDefinition, ToolRegistry

__all__ = (
    "MCP_START_TIMEOUT_MS",
    "McpConfigOption",
    "McpOption",
    "McpStartTimeoutOption",
    "McpTimeoutOption",
    "McpUsageError",
    "mcp_definitions",
    "mcp_specs",
    "open_mcp",
)

McpOption = Annotated[
    list[str],
    typer.Option(
        "--mcp",
        metavar="NAME=COMMAND",
        help="NAME=COMMAND: start an MCP server over stdio; its tools become mcp__NAME__<tool>.",
        show_default=False,
    ),
]
McpConfigOption = Annotated[
    Path | None,
    typer.Option(
        "--mcp-config",
        metavar="FILE",
        help='An MCP client config file: {"mcpServers": {NAME: {command, args, env}}}.',
        show_default=False,
    ),
]
McpTimeoutOption = Annotated[
    int,
    typer.Option(
        "--mcp-timeout-ms", metavar="MS", min=1, max=1 << 40, help="Timeout of each MCP tool call."
    ),
]
#: How long an MCP server may take to start and list its tools, by default.
MCP_START_TIMEOUT_MS: Final = 30_000
McpStartTimeoutOption = Annotated[
    int,
    typer.Option(
        "--mcp-start-timeout-ms",
        metavar="MS",
        min=1,
        max=1 << 40,
        help="How long each MCP server may take to start and list its tools.",
    ),
]


class McpUsageError(Exception):
    """A bad ``--mcp`` value, a bad config, a missing extra, or a server that won't start."""


def _quiet_sdk_logs() -> None:
    """The SDK logs a server's bad lines with tracebacks; the command says it in one line."""
    import logging
    import os

    if not os.environ.get("DSH_CODE_DEBUG"):
        sdk = logging.getLogger("mcp")
        sdk.addHandler(logging.NullHandler())
        sdk.propagate = False


def mcp_specs(values: list[str], config: Path | None) -> list[McpServerSpec]:
    """The servers named by ``--mcp`` and ``--mcp-config`` (none: an empty list)."""
    if not values and config is None:
        return []
    _quiet_sdk_logs()
    from host.mcp import (
        McpConfigError,
        McpUnavailableError,
        load_mcp_config,
        parse_mcp_option,
        require_mcp,
    )

    try:
        specs = [parse_mcp_option(value) for value in values]
        if config is not None:
            specs.extend(load_mcp_config(config))
        names = [spec.name for spec in specs]
        duplicates = sorted({name for name in names if names.count(name) > 1})
        if duplicates:
            raise McpConfigError(f"MCP server names must be unique: {', '.join(duplicates)}")
        require_mcp()
    except (McpConfigError, McpUnavailableError) as exc:
        raise McpUsageError(str(exc)) from None
    return specs


@asynccontextmanager
async def open_mcp(
    specs: list[McpServerSpec],
    registry: ToolRegistry,
    call_timeout_ms: int,
    start_timeout_ms: int = MCP_START_TIMEOUT_MS,
) -> AsyncIterator[McpServers | None]:
    """Start the servers and register their tools for the block; stop them afterwards."""
    if not specs:
        yield None
        return
    from host.mcp import McpServerError, McpServers

    hub = McpServers(specs, call_timeout_ms=call_timeout_ms, start_timeout_ms=start_timeout_ms)
    try:
        await hub.__aenter__()
    except McpServerError as exc:
        raise McpUsageError(str(exc)) from None
    try:
        hub.register(registry)
        yield hub
    finally:
        await hub.__aexit__(None, None, None)


def mcp_definitions(
    specs: list[McpServerSpec], start_timeout_ms: int = MCP_START_TIMEOUT_MS
) -> list[ToolDefinition]:
    """Start the servers, read their tools' definitions (for sdk, tools, check), stop them."""
    if not specs:
        return []
    import anyio

    from host.mcp import McpServerError, McpServers

    async def read() -> list[ToolDefinition]:
        async with McpServers(specs, start_timeout_ms=start_timeout_ms) as hub:
            return list(hub.definitions)

    try:
        return anyio.run(read)
    except McpServerError as exc:
        raise McpUsageError(str(exc)) from None
