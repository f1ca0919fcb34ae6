"""dsh-code as an MCP server: ``run_code`` over a registry, with schema look-ups and live logs."""

from __future__ import annotations

import json
import warnings
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final

import anyio

from host.mcp._approvals import Approvals
from host.mcp._resume import RESUME_RUN, PausedRuns, decisions_of, paused_text, resume_tool
from host.tools import RUN_CODE, Scope
from runtime import JournalError

from ._config import McpServeConfig
from ._logs import LogForwarder
from ._outputs import KeptOutputs
from ._sessions import ClientSessions, client_key, handle_key, needs_handle

if TYPE_CHECKING:
    from mcp.server.lowlevel import Server
    from mcp.types import CallToolResult, InputRequiredResult, ReadResourceResult, Tool

    from host.codemode import CodeMode
    from runtime import Decision, Journal, Limits, RunResult, RunStats

__all__ = (
    "GET_TOOL_SCHEMA",
    "LIST_TOOLS",
    "RESET_SESSION",
    "RESUME_RUN",
    "build_server",
    "serve",
)

GET_TOOL_SCHEMA: Final = "get_tool_schema"
LIST_TOOLS: Final = "list_tools"
RESET_SESSION: Final = "reset_session"
_SESSION_PARAMETER: Final = {
    "type": "string",
    "description": (
        "The session to continue: the `session` an earlier result gave (this connection "
        "carries no session of its own). Omit it to start a new, empty one."
    ),
}
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


def _session_note(handle: str) -> str:
    return f"session: {handle} (pass it as `session` to keep these variables)"


#: What a failure's structured content keeps of its facts when the model's text is cut.
_SHORT_FACTS: Final = ("kind", "lineno", "exception_type", "budget", "exit_status")


def render_run(
    result: RunResult,
    *,
    session: str | None = None,
    max_bytes: int | None = None,
    outputs: KeptOutputs | None = None,
) -> CallToolResult:
    """A run as an MCP tool result: text with the logs and result; ``isError`` with the facts;
    a paused run says what it waits on. ``session``: the handle of the run's session, for a
    client that must pass it back.
    ``max_bytes``: the model's budget; past it the text is a head and a tail, the structured
    content says what was cut instead of carrying it, and the whole text is kept in
    ``outputs`` (a resource, linked) when it fits there."""
    from host.codemode import cut_to_budget, failure_text, success_text

    logs = list(result.logs)
    if result.paused:
        return paused_text(result, _session_note(session) if session is not None else None)
    error = result.to_json().get("error")
    if error is None:
        text, sections = success_text(logs, result.value, result.has_value, result.value_is_repr)
    else:
        text, sections = failure_text(error["kind"], error["message"], logs)
    links: list[str] = []

    def keep(whole: str) -> str | None:
        uri = outputs.keep(whole) if outputs is not None else None
        links.extend([uri] if uri is not None else [])
        return None if uri is None else f"the MCP resource {uri}"

    shown = cut_to_budget(text, max_bytes or len(text.encode()), sections=sections, keep=keep)
    parts = [shown.text]
    structured: dict[str, Any]
    if error is None:
        structured = {"logs": logs}
        if result.has_value:
            structured["result"] = result.value
        if result.value_is_repr:  # the repr() text of a bare last expression that is not JSON
            structured["result_is_repr"] = True
    else:
        structured = {"code": "CODE_RUN_FAILED", "code_run": {**error, "logs": logs}}
    if shown.is_cut:  # the structured content must not carry what the text left out
        cut: dict[str, Any] = {
            "lines": shown.lines_left_out,
            "bytes": shown.bytes_left_out,
            "parts": list(shown.parts_cut),
        }
        if links:
            cut["resource"] = links[0]
        structured = {"cut": cut}
        if error is not None:
            short = {k: error[k] for k in _SHORT_FACTS if k in error}
            structured = {"code": "CODE_RUN_FAILED", "code_run": short, "cut": cut}
    if error is None and result.state_dropped:
        structured["state_dropped"] = dict(result.state_dropped)
        dropped = (f"{name} ({why})" for name, why in sorted(result.state_dropped.items()))
        parts.append("not carried to the next call: " + "; ".join(dropped))
    if session is not None:
        structured["session"] = session
        parts.append(_session_note(session))
    answer = _text("\n".join(parts), structured=structured, error=error is not None)
    if links:
        from mcp.types import ResourceLink

        answer.content.append(
            ResourceLink(
                type="resource_link",
                uri=links[0],
                name="output",
                description="The whole text of this run, of which the text above is a cut.",
                mime_type="text/plain",
            )
        )
    return answer


_LANGUAGE_NAMES = {"python": "Python", "typescript": "TypeScript"}


def _tool_entry(codemode: CodeMode, name: str, scope: Scope | None) -> dict[str, Any] | None:
    manifest = codemode.registry.manifest(scope)
    by_name = {entry["name"]: entry for entry in manifest}
    if name in by_name:
        return by_name[name]
    original = codemode.sdk(scope).names.get(name)  # the SDK's escaped attribute
    return by_name.get(original) if original is not None else None


def _tools(
    codemode: CodeMode, scope: Scope | None, *, sessions: bool = False, handle: bool = False
) -> list[Tool]:
    """``run_code`` (its description carries the SDK), two look-ups and, with ``sessions``,
    ``reset_session``; ``handle``: both take the ``session`` a client must pass back."""
    from mcp.types import Tool, ToolAnnotations

    models = {entry["name"]: entry for entry in codemode.model_tools(scope, persistent=sessions)}
    run_code = models.get(RUN_CODE) or {
        "description": codemode.sdk(scope, persistent=sessions).text,
        "parameters": {"type": "object", "properties": {"code": {"type": "string"}}},
    }
    description, parameters = run_code["description"], run_code["parameters"]
    if sessions:
        description += f"\nCall `{RESET_SESSION}` to start over with no variables."
    if handle:
        properties = {**parameters.get("properties", {}), "session": _SESSION_PARAMETER}
        parameters = {**parameters, "properties": properties}
    extra = [resume_tool(_SESSION_PARAMETER if handle else None)]
    if sessions:
        extra.append(
            Tool(
                name=RESET_SESSION,
                description=(
                    "Start the run_code session over: the next run_code call begins with no "
                    "variables, functions, classes or imports from earlier calls."
                ),
                input_schema={
                    "type": "object",
                    "properties": {"session": _SESSION_PARAMETER} if handle else {},
                },
                annotations=ToolAnnotations(destructive_hint=True, idempotent_hint=True),
            )
        )
    return [
        Tool(
            name=RUN_CODE,
            description=description,
            input_schema=parameters,
            annotations=ToolAnnotations(
                title=f"Run a {_LANGUAGE_NAMES.get(codemode.language, 'Python')} program that calls tools"
            ),
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
        *extra,
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
    """A low-level MCP server exposing ``run_code``, ``get_tool_schema``, ``list_tools`` and
    (one code-mode session per client, where the runtime offers sessions) ``reset_session``."""
    from mcp.server.lowlevel import Server
    from mcp.shared.exceptions import MCPDeprecationWarning
    from mcp.types import (
        CallToolRequestParams,
        EmptyResult,
        ListResourcesResult,
        ListToolsResult,
        PaginatedRequestParams,
        ReadResourceRequestParams,
        SetLevelRequestParams,
    )

    from host.codemode import INSTRUCTIONS

    config = config or McpServeConfig()
    outputs = KeptOutputs(config.max_kept_outputs, config.max_kept_output_bytes)
    sessions = None
    if config.sessions and ClientSessions.supported(codemode):
        sessions = ClientSessions(
            codemode,
            max_state_bytes=config.max_state_bytes,
            max_sessions=config.max_sessions,
            idle_s=config.session_idle_s,
        )
    tools = _tools(codemode, scope, sessions=sessions is not None)
    handle_tools = tools
    if sessions is not None:
        handle_tools = _tools(codemode, scope, sessions=True, handle=True)
    level = {"value": "debug"}
    approvals = Approvals()
    paused = PausedRuns()
    wall_s = codemode.config.limits.max_wall_ms / 1000

    async def on_list_tools(ctx: Any, _params: PaginatedRequestParams | None) -> ListToolsResult:
        return ListToolsResult(tools=handle_tools if needs_handle(ctx) else tools)

    async def on_set_level(_ctx: Any, params: SetLevelRequestParams) -> EmptyResult:
        level["value"] = params.level
        return EmptyResult()

    async def on_call_tool(
        ctx: Any, params: CallToolRequestParams
    ) -> CallToolResult | InputRequiredResult:
        args = params.arguments or {}
        if params.name in (RUN_CODE, RESUME_RUN):
            code = args.get("code")
            resume: tuple[Journal, dict[str, Decision]] | None = None
            view, handle, owner = codemode, None, _owner(ctx, None)
            if sessions is not None:
                found = _session_of(sessions, ctx, args)
                if isinstance(found, str):
                    return _text(found, error=True)
                view, handle = found
                owner = _owner(ctx, handle)
            if params.name == RESUME_RUN:
                approve = args.get("approve")
                if not isinstance(approve, bool):
                    return _text("Error: resume_run needs `approve`, true or false", error=True)
                try:
                    journal = paused.take(args.get("run_id"), owner)
                except JournalError as exc:
                    return _text(f"Error: {exc}", error=True)
                code, resume = journal.program, (journal, decisions_of(journal, approve))
            elif not isinstance(code, str):
                return _text("Error: run_code needs `code`, a string", error=True)

            async def run() -> CallToolResult:
                assert isinstance(code, str)
                result = await _run_code(
                    view, code, scope, ctx, config, level["value"], resume=resume
                )
                if result.paused and result.journal is not None:
                    paused.keep(result.journal, owner)  # for this client's resume_run
                budget = view.config.max_model_output_bytes
                return render_run(result, session=handle, max_bytes=budget, outputs=outputs)

            answer: CallToolResult | InputRequiredResult = await approvals.handle(
                ctx,  # an `ask` in the run goes to this client, by elicitation
                params,
                run,
                unknown=_text("Error: unknown or expired requestState", error=True),
                wall_s=wall_s,
            )
            return answer
        if params.name == RESET_SESSION and sessions is not None:
            return _reset_session(sessions, ctx, args)
        if params.name == GET_TOOL_SCHEMA:
            return _get_tool_schema(codemode, scope, args.get("name"))
        if params.name == LIST_TOOLS:
            return _list_tools(codemode, scope, args.get("query"))
        return _text(f"Error: unknown tool {params.name!r}", error=True)

    async def on_list_resources(
        _ctx: Any, _params: PaginatedRequestParams | None
    ) -> ListResourcesResult:
        return ListResourcesResult(resources=[])  # kept outputs are read by the URI given

    async def on_read_resource(_ctx: Any, params: ReadResourceRequestParams) -> ReadResourceResult:
        return read_output(outputs, str(params.uri))

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
            on_list_resources=on_list_resources,
            on_read_resource=on_read_resource,
            lifespan=approvals.lifespan,
        )


#: The MCP error code of a resource that is not there.
_RESOURCE_NOT_FOUND: Final = -32002


def read_output(outputs: KeptOutputs, uri: str) -> ReadResourceResult:
    """The ``resources/read`` answer for a kept output; an MCP error if it is not kept."""
    from mcp.shared.exceptions import MCPError
    from mcp.types import ReadResourceResult, TextResourceContents

    text = outputs.read(uri)
    if text is None:
        raise MCPError(
            _RESOURCE_NOT_FOUND,
            f"no output kept at {uri[:120]!r} (this server keeps the last "
            f"{outputs.max_outputs} cut outputs, {outputs.max_bytes} bytes at most)",
        )
    return ReadResourceResult(
        contents=[TextResourceContents(uri=uri, mime_type="text/plain", text=text)]
    )


def _session_of(
    sessions: ClientSessions, ctx: Any, args: dict[str, Any]
) -> tuple[CodeMode, str | None] | str:
    """The code mode of the request's session, and the handle to give back (None where the
    connection is the session); or why there is none."""
    if not needs_handle(ctx):
        return sessions.get(client_key(ctx)), None
    handle = args.get("session")
    if handle is None:
        handle = sessions.new_handle()
    elif not isinstance(handle, str) or not sessions.known(handle_key(handle)):
        return (
            f"Error: no session {handle!r} here (the server restarted, or dropped it after "
            f"{sessions.idle_s:g} s unused); omit `session` to start a new one"
        )
    return sessions.get(handle_key(handle)), handle


def _owner(ctx: Any, handle: str | None) -> str:
    """The client a paused run belongs to (only it may resume it): its connection, or the
    session handle it names (over HTTP without MCP sessions, without one: any client that
    has the run's id)."""
    if handle is not None:
        return handle_key(handle)
    return "" if needs_handle(ctx) else client_key(ctx)


def _reset_session(sessions: ClientSessions, ctx: Any, args: dict[str, Any]) -> CallToolResult:
    if not needs_handle(ctx):
        sessions.reset(client_key(ctx))
        return _text("The session was reset: the next run_code call starts with no variables.")
    handle = args.get("session")
    if not isinstance(handle, str) or not sessions.known(handle_key(handle)):
        return _text("Nothing to reset: a run_code call without `session` starts empty.")
    sessions.reset(handle_key(handle))
    return _text(
        f"The session {handle} was reset: its next run_code call starts with no variables.",
        structured={"session": handle},
    )


async def _run_code(
    codemode: CodeMode,
    code: str,
    scope: Scope | None,
    ctx: Any,
    config: McpServeConfig,
    client_level: str,
    *,
    resume: tuple[Journal, dict[str, Decision]] | None = None,
) -> RunResult:
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
                resume=resume[0] if resume is not None else None,
                decisions=resume[1] if resume is not None else None,
            )
        finally:
            forwarder.close()
            progress.done.set()
    return result


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
