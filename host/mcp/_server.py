"""dsh-code as an MCP server: ``run_code`` over a registry, with schema look-ups and live logs."""

from __future__ import annotations

import json
import warnings
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final

import anyio

from host.mcp._approvals import Approvals
from host.tools import RUN_CODE, Scope

from ._config import McpServeConfig
from ._logs import LogForwarder

if TYPE_CHECKING:
    from mcp.server.lowlevel import Server
    from mcp.types import CallToolResult, InputRequiredResult, Tool

    from host.codemode import CodeMode
    from runtime import Limits, RunResult, RunStats

__all__ = ("GET_TOOL_SCHEMA", "LIST_TOOLS", "build_server", "serve")

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


def _tools(codemode: CodeMode, scope: Scope | None) -> list[Tool]:
    """The three tools: ``run_code`` (its description carries the SDK) and two look-ups."""
    from mcp.types import Tool, ToolAnnotations

    models = {entry["name"]: entry for entry in codemode.model_tools(scope)}
    run_code = models.get(RUN_CODE) or {
        "description": codemode.sdk(scope).text,
        "parameters": {"type": "object", "properties": {"code": {"type": "string"}}},
    }
    return [
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


def _get_tool_schema(codemode: CodeMode, scope: Scope | None, name: Any) -> CallToolResult:
    entry = _tool_entry(codemode, name, scope) if isinstance(name, str) else None
    if entry is None:
        names = sorted(entry["name"] for entry in codemode.registry.manifest(scope))
        return _text(f"Error: no tool named {name!r}; known: {', '.join(names)}", error=True)
    return _text(json.dumps(entry, ensure_ascii=False, indent=2), structured=entry)


def _list_tools(codemode: CodeMode, scope: Scope | None, query: Any) -> CallToolResult:
    needle = query.lower() if isinstance(query, str) else ""
    lines = []
    for entry in codemode.registry.manifest(scope):
        first = (entry["description"] or "").strip().splitlines()
        line = f"{entry['name']}: {first[0]}" if first else entry["name"]
        if needle in line.lower():
            lines.append(line)
    return _text("\n".join(lines) if lines else "(no tools match)")


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
    )

    from host.codemode import INSTRUCTIONS

    config = config or McpServeConfig()
    tools = _tools(codemode, scope)
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
            return _get_tool_schema(codemode, scope, args.get("name"))
        if params.name == LIST_TOOLS:
            return _list_tools(codemode, scope, args.get("query"))
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

    async def send(text: str) -> None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", MCPDeprecationWarning)
            await ctx.session.send_log_message(
                level=config.log_level,
                data=text,
                logger="dsh-code",
                related_request_id=ctx.request_id,
            )

    forwarder = LogForwarder(
        send,
        max_pending_chars=config.log_pending_chars,
        max_batch_chars=config.log_batch_chars,
    )
    wanted = _LOG_LEVELS.index(config.log_level) >= _LOG_LEVELS.index(client_level)
    progress = _Progress(ctx, codemode.config.limits, config.progress_interval_s)
    async with anyio.create_task_group() as group:
        group.start_soon(forwarder.run)
        group.start_soon(progress.run)
        try:
            result = await codemode.run_program(
                code,
                scope=scope,
                on_log=forwarder.push if wanted else None,
                on_progress=progress.update,
            )
        finally:
            forwarder.close()
            progress.done.set()
    return render_run(result)


class _Progress:
    """Progress notifications every ``interval_s`` while a run lasts (with a progress token)."""

    def __init__(self, ctx: Any, limits: Limits, interval_s: float) -> None:
        self.ctx = ctx
        self.limits = limits
        self.interval_s = interval_s
        self.stats: RunStats | None = None
        self.done = anyio.Event()

    def update(self, stats: RunStats) -> None:
        self.stats = stats

    async def run(self) -> None:
        meta = getattr(self.ctx, "meta", None) or {}
        if self.interval_s <= 0 or meta.get("progress_token", meta.get("progressToken")) is None:
            return
        started = anyio.current_time()
        total = self.limits.max_wall_ms / 1000
        while True:
            with anyio.move_on_after(self.interval_s):
                await self.done.wait()
            if self.done.is_set():
                return
            elapsed = anyio.current_time() - started
            stats = self.stats
            compute = stats.compute_ms / 1000 if stats is not None else 0.0
            calls = stats.calls if stats is not None else 0
            message = (
                f"running {elapsed:.0f} s of {total:g} s; compute "
                f"{compute:.2f}/{self.limits.compute_ms / 1000:g} s; {calls} calls"
            )
            try:
                await self.ctx.session.report_progress(min(elapsed, total), total, message)
            except Exception:  # a client that went away must not fail the run
                return


async def serve(
    codemode: CodeMode,
    config: McpServeConfig | None = None,
    *,
    scope: Scope | None = None,
    on_ready: Callable[[str], None] | None = None,
    stdio_fds: tuple[int, int] | None = None,
) -> None:
    """Serve over stdio (``stdio_fds``: read without a thread) or HTTP; ``on_ready`` when up."""
    config = config or McpServeConfig()
    server = build_server(codemode, config, scope=scope)
    if config.http_port is None:
        from mcp.server.stdio import stdio_server

        from ._stdio import FdLines, FdWriter

        streams: dict[str, Any] = {}
        if stdio_fds is not None:
            streams = {"stdin": FdLines(stdio_fds[0]), "stdout": FdWriter(stdio_fds[1])}
        async with stdio_server(**streams) as (read, write):
            if on_ready is not None:
                on_ready("stdio")
            await server.run(read, write, server.create_initialization_options())
        return
    from ._http import serve_http

    await serve_http(server, config, on_ready)
