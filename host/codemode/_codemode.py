"""Code mode: the reserved ``run_code`` tool, the SDK section, and presentation modes.

A program's every call to ``tools.<name>`` goes through the registry's full pipeline for
the caller's scope; concurrency-safe calls overlap, exclusive ones are barriers; a failed
call raises ``ToolCallError`` in the program; a failed run is a ``CODE_RUN_FAILED`` result.
"""

from __future__ import annotations

import contextvars
import itertools
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

import anyio
import msgspec

import sdkgen
from host.codemode._scheduler import SubCallScheduler
from host.telemetry import name_tool_call
from host.tools import (
    RUN_CODE,
    AbortController,
    AbortSignal,
    ErrorCode,
    Scope,
    ToolCallRequest,
    ToolDefinition,
    ToolError,
    ToolRegistry,
    ToolResult,
    ToolRunContext,
    WithContent,
    anthropic_tools,
    define_tool,
    from_json_schema,
    fuse_signals,
    is_concurrency_safe,
    openai_tools,
    thaw,
    validate,
)
from runtime import (
    CodeRuntime,
    Limits,
    RunRequest,
    RunResult,
    RunStats,
    ToolCallError,
    current_call,
)

__all__ = (
    "DISPATCH_EVENT",
    "DISPATCH_START_EVENT",
    "INSTRUCTIONS",
    "PERSISTENT_NOTE",
    "SYNC_INSTRUCTIONS",
    "CodeMode",
    "CodeModeConfig",
    "CodeModeSession",
    "CodeRunFailed",
    "SdkSection",
)

DISPATCH_START_EVENT = "tool/code-dispatch-start"
DISPATCH_EVENT = "tool/code-dispatch"

INSTRUCTIONS = """\
To call tools, write one Python program and pass it to `run_code` as `code`.
The program runs as a Python script (`__name__ == "__main__"`); top-level `await` works,
and a top-level `return` gives its result: a JSON value (dict, list, str, int, float, bool,
None); `print` for logs. Call tools as `await tools.<name>(arg=value, ...)` with keyword
arguments, as declared below. Independent calls can run together:
`await asyncio.gather(tools.a(...), tools.b(...))` (`import asyncio` first). A failed call
raises `ToolCallError` (`.tool`, `.message`, `.code`); catch it to recover. Only the logs
and the returned value come back to you."""

#: The instructions when the program calls tools plainly (``call_style="sync"``).
SYNC_INSTRUCTIONS = """\
To call tools, write one Python program and pass it to `run_code` as `code`.
The program runs as a Python script (`__name__ == "__main__"`); a top-level `return` gives
its result: a JSON value (dict, list, str, int, float, bool, None); `print` for logs. Call
tools as plain functions, `tools.<name>(arg=value, ...)`, with keyword arguments, as
declared below (no `await`: each call returns its result; calls from threads run
together). A failed call raises `ToolCallError` (`.tool`, `.message`, `.code`); catch it to
recover. Only the logs and the returned value come back to you."""

#: What the SDK section adds when programs run in a session.
PERSISTENT_NOTE = (
    "Variables, functions, classes and imports persist from one `run_code` call to the "
    "next (each call still runs in a fresh process); names that cannot be carried (open "
    "files, sockets, generators) are dropped and named in the result."
)

#: The session of the ``run_code`` call in progress (set by ``CodeModeSession.run``).
_SESSION: contextvars.ContextVar[CodeModeSession | None] = contextvars.ContextVar(
    "dsh_codemode_session", default=None
)

RUN_CODE_DESCRIPTION = (
    "Run a Python program that calls the tools described in the tools SDK section, in a "
    "fresh sandboxed process. Returns {logs, result?}."
)


_RUN_CODE_PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {"code": {"type": "string", "description": "the Python program"}},
    "required": ["code"],
    "additionalProperties": False,
}


class CodeModeConfig(msgspec.Struct, frozen=True, kw_only=True):
    """How code mode runs programs."""

    limits: Limits = msgspec.field(default_factory=Limits)
    """The runtime limits; ``max_parallel_sub_calls`` bounds overlapping safe calls."""
    policy: Literal["python", "restricted"] = "python"
    call_style: Literal["async", "sync"] = "async"
    """How programs call tools: ``await tools.x(...)`` or plain ``tools.x(...)``; the SDK
    section and its stubs say which."""
    max_tool_calls: int = 1_000
    """Tool calls one run may make; the next raises ``ToolCallError`` (code ``DENIED``)."""
    preflight_check: bool = False
    """Type-check each program against the SDK before running it (sdkgen.check_program)."""


class SdkSection(msgspec.Struct, frozen=True):
    """The SDK section for one scope: the text the model reads, its hash, and the name map."""

    text: str
    sha256: str
    names: dict[str, str]
    """Escaped Python attribute -> original tool name."""


class CodeRunFailed(ToolError):
    """A run_code failure: the pipeline turns it into a ``CODE_RUN_FAILED`` result."""

    def __init__(self, message: str, *, content: str, meta: Mapping[str, Any]) -> None:
        super().__init__(
            message,
            code=ErrorCode.CODE_RUN_FAILED,
            name="CodeRunFailedError",
            content=content,
            meta=meta,
        )


def _render_success(logs: list[str], value: Any, has_value: bool) -> str:
    parts = []
    if logs:
        parts.append("logs:\n" + "\n".join(logs))
    if has_value:
        parts.append("result:\n" + msgspec.json.encode(value).decode())
    return "\n".join(parts) if parts else "(no logs, no result)"


def _failure(result: RunResult) -> CodeRunFailed:
    error = result.error
    assert error is not None
    facts = msgspec.to_builtins(error)
    meta = {"code_run": {**facts, "logs": list(result.logs)}}
    text = f"Error: the program failed ({error.kind}): {error.message}"
    if result.logs:
        text += "\nlogs so far:\n" + "\n".join(result.logs)
    return CodeRunFailed(f"{error.kind}: {error.message}", content=text, meta=meta)


def _optional_non_null(manifest: list[dict[str, Any]]) -> dict[str, frozenset[str]]:
    """Per tool, its optional parameters whose schema does not accept null."""
    out: dict[str, frozenset[str]] = {}
    for entry in manifest:
        schema = entry.get("parameters") or {}
        required = set(schema.get("required", ()))
        names = set()
        for name, prop in (schema.get("properties") or {}).items():
            if name in required:
                continue
            try:
                accepts_null = validate(from_json_schema(prop), None) is None
            except Exception:
                accepts_null = True  # a schema we cannot read: pass the argument through
            if not accepts_null:
                names.add(name)
        out[entry["name"]] = frozenset(names)
    return out


@dataclass(frozen=True)
class _ToolView:
    """What code mode derives from one set of visible tools (costly: ~1.5 ms for 60 tools)."""

    definitions: tuple[ToolDefinition, ...]  # held, so their ids stay unique while cached
    manifest: list[dict[str, Any]]
    names: dict[str, str]
    optional_non_null: dict[str, frozenset[str]]


#: Tool views kept per CodeMode (agents reuse a few scopes).
_VIEWS_KEPT = 16


class CodeMode:
    """Code mode over a registry and a code runtime; installs the reserved ``run_code``."""

    def __init__(
        self,
        registry: ToolRegistry,
        runtime: CodeRuntime,
        config: CodeModeConfig | None = None,
    ) -> None:
        self.registry = registry
        self.runtime = runtime
        self.config = config or CodeModeConfig()
        self._views: dict[tuple[int, ...], _ToolView] = {}
        self._ids = itertools.count(1)
        self.definition = define_tool(
            name=RUN_CODE,
            description=RUN_CODE_DESCRIPTION,
            parameters=_RUN_CODE_PARAMETERS,
            execute=self._execute,
            output={
                "schema": {
                    "type": "object",
                    "properties": {
                        "logs": {"type": "array", "items": {"type": "string"}},
                        "result": {},
                    },
                    "required": ["logs"],
                },
                "render": lambda _args, value: _render_success(
                    list(value["logs"]), value.get("result"), "result" in value
                ),
            },
        )
        registry.install_run_code(self.definition)

    # ---- what the model sees -----------------------------------------------------------------

    def _view(self, scope: Scope | None) -> _ToolView:
        """The manifest, SDK names and optional-parameter map of ``scope``'s visible tools,
        computed once per set of definitions (definitions are immutable; a set changes when
        a tool is registered, disposed, shadowed or masked, and then has other members)."""
        definitions = tuple(self.registry.visible(scope))
        key = tuple(id(d) for d in definitions)
        view = self._views.pop(key, None)
        if view is None:
            manifest = self.registry.manifest(scope)
            view = _ToolView(
                definitions, manifest, sdkgen.python_names(manifest), _optional_non_null(manifest)
            )
        self._views[key] = view  # most recently used last
        if len(self._views) > _VIEWS_KEPT:
            del self._views[next(iter(self._views))]
        return view

    def sdk(self, scope: Scope | None = None, *, persistent: bool = False) -> SdkSection:
        """The SDK section for ``scope``'s visible tools: deterministic, byte-identical.
        ``persistent``: programs run in a session (their variables persist), and it says so."""
        view = self._view(scope)
        style = self.config.call_style
        instructions = SYNC_INSTRUCTIONS if style == "sync" else INSTRUCTIONS
        if persistent:
            instructions += "\n" + PERSISTENT_NOTE
        stubs = sdkgen.python_sdk(view.manifest, call_style=style)
        text = instructions + "\n\n```python\n" + stubs + "```\n"
        return SdkSection(text=text, sha256=sdkgen.sdk_hash(text), names=dict(view.names))

    def session(
        self, *, state: bytes | None = None, max_state_bytes: int | None = None
    ) -> CodeModeSession:
        """A session for one agent: its ``run(code)`` is a ``run_code`` call whose program's
        variables persist to the next call (the runtime must offer sessions)."""
        opener = getattr(self.runtime, "session", None)
        if opener is None:
            raise TypeError(f"{type(self.runtime).__name__} has no sessions")
        options: dict[str, Any] = {"state": state}
        if max_state_bytes is not None:
            options["max_state_bytes"] = max_state_bytes
        return CodeModeSession(self, opener(**options))

    def model_tools(
        self,
        scope: Scope | None = None,
        *,
        format: Literal["json", "openai", "anthropic"] = "json",
        persistent: bool = False,
    ) -> list[dict[str, Any]]:
        """The function definitions the model gets under the scope's presentation mode
        (``persistent``: the SDK section says variables persist, for a session)."""
        mode = self.registry.mode(scope)
        schemas = list(self.registry.schemas(scope)) if mode in ("native", "both") else []
        if mode in ("code", "both"):
            from host.tools import ToolSchema

            schemas.append(
                ToolSchema(
                    name=RUN_CODE,
                    description=RUN_CODE_DESCRIPTION
                    + "\n\n"
                    + self.sdk(scope, persistent=persistent).text,
                    parameters=_RUN_CODE_PARAMETERS,
                )
            )
        if format == "openai":
            return openai_tools(schemas)
        if format == "anthropic":
            return anthropic_tools(schemas)
        return [s.to_dict() for s in schemas]

    # ---- running ---------------------------------------------------------------------------

    async def _execute(self, args: Any, ctx: ToolRunContext) -> Any:
        images: list[dict[str, Any]] = []
        result = await self.run_program(
            str(args["code"]), scope=ctx.scope, signal=ctx.signal, images=images
        )
        if result.error is not None:
            raise _failure(result)
        value: dict[str, Any] = {"logs": list(result.logs)}
        if result.has_value:
            value["result"] = result.value
        # Images the program's calls returned reach the model after the run's own text.
        return WithContent(value, images) if images else value

    async def run(
        self,
        code: str,
        *,
        scope: Scope | None = None,
        signal: AbortSignal | None = None,
        call_id: str | None = None,
    ) -> ToolResult:
        """Invoke ``run_code`` through the registry's pipeline, as a model's call would."""
        return await self.registry.invoke(
            RUN_CODE, {"code": code}, scope=scope, signal=signal, call_id=call_id
        )

    async def run_program(
        self,
        code: str,
        *,
        scope: Scope | None = None,
        signal: AbortSignal | None = None,
        on_log: Callable[[str], None] | None = None,
        on_call: Callable[[str, ToolResult], None] | None = None,
        on_progress: Callable[[RunStats], None] | None = None,
        images: list[dict[str, Any]] | None = None,
    ) -> RunResult:
        """Run a program with the scope's tools bound under ``tools.``; the raw run result.

        Unfinished sub-calls are aborted and drained before this returns. ``images``, if
        given, collects the image parts of the calls' results, in call order.
        """
        if self.config.preflight_check:
            failed = self._preflight(code, scope)
            if failed is not None:
                return failed
        controller = AbortController()
        sub_signal, unlink = (
            fuse_signals(signal, controller.signal)
            if signal is not None
            else (controller.signal, None)
        )
        try:
            async with anyio.create_task_group() as calls:
                bindings = self._bindings(scope, sub_signal, calls, on_call, images)
                request = RunRequest(
                    program=code,
                    bindings=bindings,
                    limits=self.config.limits,
                    policy=self.config.policy,
                    call_style=self.config.call_style,
                    on_log=on_log,
                    on_progress=on_progress,
                    abort=signal,
                )
                session = _SESSION.get()
                if session is not None and session.codemode is self:
                    result: RunResult = await session.runtime_session.run(request)
                else:
                    result = await self.runtime.run(request)
                controller.abort("the program's run settled")  # unfinished calls: ABORTED
            return result
        finally:
            if unlink is not None:
                unlink()

    def _preflight(self, code: str, scope: Scope | None) -> RunResult | None:
        from runtime import RunError

        diagnostics = sdkgen.check_program(
            code, self._view(scope).manifest, call_style=self.config.call_style
        )
        errors = [d for d in diagnostics if d.severity == "error"]
        if not errors:
            return None
        text = sdkgen.render_diagnostics(errors)
        return RunResult(
            logs=[],
            error=RunError(
                kind="parse", message=f"the type check failed:\n{text}", lineno=errors[0].line
            ),
        )

    def _bindings(
        self,
        scope: Scope | None,
        signal: AbortSignal,
        calls: anyio.abc.TaskGroup,
        on_call: Callable[[str, ToolResult], None] | None,
        images: list[dict[str, Any]] | None,
    ) -> dict[str, Any]:
        view = self._view(scope)
        names, optional_non_null = view.names, view.optional_non_null
        scheduler = SubCallScheduler(self.config.limits.max_parallel_sub_calls)
        calls_left = [self.config.max_tool_calls]  # shared by every binding of this run
        actual_scope = scope or self.registry.root

        def make(tool: str) -> Any:
            droppable = optional_non_null.get(tool, frozenset())

            async def binding(args: Any) -> Any:
                name_tool_call(tool)  # the runtime's span knows the binding, not the tool
                if droppable and isinstance(args, dict):
                    # The SDK writes optional parameters as `p: T | None = None`; an explicit
                    # None there means "not given", unless the parameter itself takes null.
                    args = {k: v for k, v in args.items() if not (v is None and k in droppable)}
                if calls_left[0] <= 0:
                    raise ToolCallError(
                        tool,
                        f"this run already made {self.config.max_tool_calls} tool calls "
                        "(max_tool_calls); do more per call or split the work",
                        "DENIED",
                    )
                calls_left[0] -= 1
                outcome: list[ToolResult] = []
                done = anyio.Event()

                async def dispatch() -> None:
                    try:
                        outcome.append(
                            await self._dispatch(tool, args, actual_scope, signal, scheduler)
                        )
                    finally:
                        done.set()

                # In the run's own task group the call would die with the run; here it is
                # aborted through its signal and drained, so its result is still published.
                calls.start_soon(dispatch)
                await done.wait()
                result = outcome[0]
                if on_call is not None:
                    on_call(tool, result)
                if images is not None:
                    images.extend(
                        thaw(part) for part in result.content if part.get("type") == "image"
                    )
                if result.error is not None:
                    raise ToolCallError(tool, result.error.message, str(result.error.code))
                return thaw(result.value)

            return binding

        return {f"tools.{escaped}": make(original) for escaped, original in names.items()}

    async def _dispatch(
        self,
        tool: str,
        args: Any,
        scope: Scope,
        signal: AbortSignal,
        scheduler: SubCallScheduler,
    ) -> ToolResult:
        info = current_call.get()  # the runtime's stable id, when a runtime set one
        call_id = info.call_id if info is not None else f"code-{next(self._ids)}"
        parallel = is_concurrency_safe(self.registry, ToolCallRequest(tool, args), scope)
        async with scheduler.slot(parallel):
            self.registry.emit(
                DISPATCH_START_EVENT,
                {"call_id": call_id, "name": tool, "args": args, "parallel": parallel},
            )
            result = await self.registry.invoke(
                tool, args, scope=scope, signal=signal, call_id=call_id
            )
            self.registry.emit(
                DISPATCH_EVENT,
                {
                    "call_id": call_id,
                    "name": tool,
                    "is_error": result.is_error,
                    "content": thaw(result.content),
                    "result": result.to_dict(),
                },
            )
        return result


class CodeModeSession:
    """Code mode for one agent whose programs' variables persist between ``run_code`` calls."""

    def __init__(self, codemode: CodeMode, runtime_session: Any) -> None:
        self.codemode = codemode
        self.runtime_session = runtime_session

    @property
    def state(self) -> bytes:
        """The session's state, an opaque blob (save it to resume later)."""
        state: bytes = self.runtime_session.state
        return state

    @property
    def names(self) -> tuple[str, ...]:
        """The names the state carries."""
        return tuple(self.runtime_session.names)

    def sdk(self, scope: Scope | None = None) -> SdkSection:
        """The SDK section, saying that variables persist between calls."""
        return self.codemode.sdk(scope, persistent=True)

    def model_tools(
        self, scope: Scope | None = None, *, format: Literal["json", "openai", "anthropic"] = "json"
    ) -> list[dict[str, Any]]:
        """The function definitions the model gets, ``run_code`` saying variables persist."""
        return self.codemode.model_tools(scope, format=format, persistent=True)

    async def run(
        self,
        code: str,
        *,
        scope: Scope | None = None,
        signal: AbortSignal | None = None,
        call_id: str | None = None,
    ) -> ToolResult:
        """A ``run_code`` call in this session, through the registry's pipeline."""
        token = _SESSION.set(self)
        try:
            return await self.codemode.run(code, scope=scope, signal=signal, call_id=call_id)
        finally:
            _SESSION.reset(token)

    async def __aenter__(self) -> CodeModeSession:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        return None
