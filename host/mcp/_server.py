"""dsh-code as an MCP server: ``run_code`` over a registry, with schema look-ups and live logs."""

from __future__ import annotations

import json
import math
import sys
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

import anyio

from host.mcp._approvals import Approvals
from host.tools import RUN_CODE, Scope

if TYPE_CHECKING:
    from mcp.server.lowlevel import Server
    from mcp.types import CallToolResult, InputRequiredResult

    from host.codemode import CodeMode
    from runtime import RunResult

__all__ = ("GET_TOOL_SCHEMA", "LIST_TOOLS", "McpServeConfig", "build_server", "serve")

GET_TOOL_SCHEMA: Final = "get_tool_schema"
LIST_TOOLS: Final = "list_tools"
_LOG_LEVELS: Final = (
    "debug",
    "info",
    "notice",
    "warning",
    "error",
    "critical",
    "alert",
    "emergency",
)


@dataclass(frozen=True)
class McpServeConfig:
    """How ``dsh-code mcp`` serves: its name, and streamable HTTP on ``host:http_port``."""

    name: str = "dsh-code"
    http_port: int | None = None
    host: str = "127.0.0.1"
    path: str = "/mcp"
    log_level: str = "info"
    """The level of the log notifications that carry a program's output lines."""


def _text(text: str, *, structured: Any = None, error: bool = False) -> CallToolResult:
    from mcp.types import CallToolResult, TextContent

    return CallToolResult(
        content=[TextContent(type="text", text=text)],
        structured_content=structured,
        is_error=error,
    )


def render_run(result: RunResult) -> CallToolResult:
    """A run as an MCP tool result: text with the logs and result; ``isError`` with the facts."""
    logs = list(result.logs)
    if result.error is None:
        parts = []
        if logs:
            parts.append("logs:\n" + "\n".join(logs))
        structured: dict[str, Any] = {"logs": logs}
        if result.has_value:
            parts.append("result:\n" + json.dumps(result.value, ensure_ascii=False))
            structured["result"] = result.value
        return _text("\n".join(parts) if parts else "(no logs, no result)", structured=structured)
    error = result.to_json()["error"]
    text = f"Error: the program failed ({error['kind']}): {error['message']}"
    if logs:
        text += "\nlogs so far:\n" + "\n".join(logs)
    facts = {"code": "CODE_RUN_FAILED", "code_run": {**error, "logs": logs}}
    return _text(text, structured=facts, error=True)


def _tool_entry(codemode: CodeMode, name: str, scope: Scope | None) -> dict[str, Any] | None:
    manifest = codemode.registry.manifest(scope)
    by_name = {entry["name"]: entry for entry in manifest}
    if name in by_name:
        return by_name[name]
    original = codemode.sdk(scope).names.get(name)  # the SDK's escaped attribute
    return by_name.get(original) if original is not None else None


def build_server(
    codemode: CodeMode,
    config: McpServeConfig | None = None,
    *,
    scope: Scope | None = None,
) -> Server[Any]:
    """A low-level MCP server exposing ``run_code``, ``get_tool_schema`` and ``list_tools``."""
    from mcp.server.lowlevel import Server
    from mcp.shared.exceptions import MCPDeprecationWarning
    from mcp.types import (
        CallToolRequestParams,
        EmptyResult,
        ListToolsResult,
        PaginatedRequestParams,
        SetLevelRequestParams,
        Tool,
        ToolAnnotations,
    )

    from host.codemode import INSTRUCTIONS

    config = config or McpServeConfig()
    sdk = codemode.sdk(scope)
    models = {entry["name"]: entry for entry in codemode.model_tools(scope)}
    run_code = models.get(RUN_CODE) or {
        "description": sdk.text,
        "parameters": {"type": "object", "properties": {"code": {"type": "string"}}},
    }
    names = sorted(entry["name"] for entry in codemode.registry.manifest(scope))
    tools = [
        Tool(
            name=RUN_CODE,
            description=run_code["description"],
            input_schema=run_code["parameters"],
            annotations=ToolAnnotations(title="Run a Python program that calls tools"),
        ),
        Tool(
            name=GET_TOOL_SCHEMA,
            description=(
                "The full JSON Schema of one tool of the run_code SDK: "
                "{name, description, parameters, output?}. `name` is the tool's name or "
                "its SDK attribute."
            ),
            input_schema={
                "type": "object",
                "properties": {"name": {"type": "string", "description": "a tool name"}},
                "required": ["name"],
            },
            annotations=ToolAnnotations(read_only_hint=True),
        ),
        Tool(
            name=LIST_TOOLS,
            description=(
                "The tools the run_code SDK offers, one per line with its description; "
                "`query` keeps those whose name or description contains it."
            ),
            input_schema={"type": "object", "properties": {"query": {"type": "string"}}},
            annotations=ToolAnnotations(read_only_hint=True),
        ),
    ]
    level = {"value": "debug"}
    approvals = Approvals()

    async def on_list_tools(_ctx: Any, _params: PaginatedRequestParams | None) -> ListToolsResult:
        return ListToolsResult(tools=tools)

    async def on_set_level(_ctx: Any, params: SetLevelRequestParams) -> EmptyResult:
        level["value"] = params.level
        return EmptyResult()

    async def on_call_tool(
        ctx: Any, params: CallToolRequestParams
    ) -> CallToolResult | InputRequiredResult:
        args = params.arguments or {}
        if params.name == RUN_CODE:
            code = args.get("code")
            if not isinstance(code, str):
                return _text("Error: run_code needs `code`, a string", error=True)
            answer: CallToolResult | InputRequiredResult = await approvals.handle(
                ctx,  # an `ask` in the run goes to this client, by elicitation
                params,
                lambda: _run_code(codemode, code, scope, ctx, config, level["value"]),
                unknown=_text("Error: unknown or expired requestState", error=True),
            )
            return answer
        if params.name == GET_TOOL_SCHEMA:
            name = args.get("name")
            entry = _tool_entry(codemode, name, scope) if isinstance(name, str) else None
            if entry is None:
                return _text(
                    f"Error: no tool named {name!r}; known: {', '.join(names)}", error=True
                )
            return _text(json.dumps(entry, ensure_ascii=False, indent=2), structured=entry)
        if params.name == LIST_TOOLS:
            query = args.get("query")
            needle = query.lower() if isinstance(query, str) else ""
            lines = []
            for entry in codemode.registry.manifest(scope):
                first = (entry["description"] or "").strip().splitlines()
                line = f"{entry['name']}: {first[0]}" if first else entry["name"]
                if needle in line.lower():
                    lines.append(line)
            return _text("\n".join(lines) if lines else "(no tools match)")
        return _text(f"Error: unknown tool {params.name!r}", error=True)

    with warnings.catch_warnings():
        # Log notifications are how a program's output streams to the client; the SDK marks
        # the logging capability deprecated from protocol 2026-07-28 on.
        warnings.simplefilter("ignore", MCPDeprecationWarning)
        return Server(
            config.name,
            instructions=INSTRUCTIONS,  # the SDK itself is in run_code's description
            on_list_tools=on_list_tools,
            on_call_tool=on_call_tool,
            on_set_logging_level=on_set_level,
            lifespan=approvals.lifespan,
        )


async def _run_code(
    codemode: CodeMode,
    code: str,
    scope: Scope | None,
    ctx: Any,
    config: McpServeConfig,
    client_level: str,
) -> CallToolResult:
    from mcp.shared.exceptions import MCPDeprecationWarning

    wanted = _LOG_LEVELS.index(config.log_level) >= _LOG_LEVELS.index(client_level)
    send, receive = anyio.create_memory_object_stream[str](math.inf)

    async def forward() -> None:
        async with receive:
            async for line in receive:
                if not wanted:
                    continue
                try:
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore", MCPDeprecationWarning)
                        await ctx.session.send_log_message(
                            level=config.log_level,
                            data=line,
                            logger="dsh-code",
                            related_request_id=ctx.request_id,
                        )
                except Exception:  # a client that went away must not fail the run
                    wanted_off()

    def wanted_off() -> None:
        nonlocal wanted
        wanted = False

    def on_log(line: str) -> None:
        try:
            send.send_nowait(line)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            pass

    async with anyio.create_task_group() as group:
        group.start_soon(forward)
        with send:
            result = await codemode.run_program(code, scope=scope, on_log=on_log)
    return render_run(result)


async def serve(
    codemode: CodeMode,
    config: McpServeConfig | None = None,
    *,
    scope: Scope | None = None,
    on_ready: Callable[[str], None] | None = None,
) -> None:
    """Serve ``codemode`` over stdio, or streamable HTTP on localhost when ``http_port`` is set."""
    config = config or McpServeConfig()
    server = build_server(codemode, config, scope=scope)
    if config.http_port is None:
        from mcp.server.stdio import stdio_server

        async with stdio_server() as (read, write):
            if on_ready is not None:
                on_ready("stdio")
            await server.run(read, write, server.create_initialization_options())
        return
    import uvicorn

    app = server.streamable_http_app(streamable_http_path=config.path, host=config.host)
    uv = uvicorn.Server(
        uvicorn.Config(
            app, host=config.host, port=config.http_port, log_level="warning", lifespan="on"
        )
    )

    async def announce() -> None:
        while not uv.started:
            await anyio.sleep(0.02)
        port = config.http_port
        for listener in getattr(uv, "servers", ()):
            for sock in getattr(listener, "sockets", ()):
                port = sock.getsockname()[1]
        url = f"http://{config.host}:{port}{config.path}"
        if on_ready is not None:
            on_ready(url)
        else:
            print(f"dsh-code mcp: serving {url}", file=sys.stderr, flush=True)

    bound = True
    async with anyio.create_task_group() as group:
        group.start_soon(announce)
        try:
            await uv.serve()
        except SystemExit:  # uvicorn exits when it cannot bind
            bound = False
        finally:
            group.cancel_scope.cancel()
    if not bound:
        raise OSError(f"cannot serve on {config.host}:{config.http_port}")
