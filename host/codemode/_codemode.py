"""Code mode: the reserved ``run_code`` tool, the SDK section, and presentation modes.

A program's every call to ``tools.<name>`` goes through the registry's full pipeline for
the caller's scope; concurrency-safe calls overlap, exclusive ones are barriers; a failed
call raises ``ToolCallError`` in the program; a failed run is a ``CODE_RUN_FAILED`` result.
"""

from __future__ import annotations

import contextvars
import itertools
from collections.abc import Callable, Mapping
from typing import Any, Literal

import anyio
import msgspec

import sdkgen
from host.codemode._durable import PausedRuns, resume_decisions
from host.codemode._output import (
    MIN_MODEL_OUTPUT_BYTES,
    Sections,
    cut_to_budget,
    success_text,
)
from host.codemode._render import (
    failure,
    pause_reason,
    paused_value,
    render_paused,
)
from host.codemode._scheduler import SubCallScheduler
from host.codemode._texts import (
    INSTRUCTIONS,
    LANGUAGES,
    PERSISTENT_NOTE,
    RUN_CODE_DESCRIPTION,
    SYNC_INSTRUCTIONS,
    TYPESCRIPT_INSTRUCTIONS,
    run_code_parameters,
)
from host.codemode._views import VIEWS_KEPT, ToolView, optional_non_null
from host.telemetry import name_tool_call
from host.tools import (
    RUN_CODE,
    AbortController,
    AbortSignal,
    ErrorCode,
    RunSettled,
    Scope,
    ToolCallRequest,
    ToolRegistry,
    ToolResult,
    ToolRunContext,
    WithContent,
    anthropic_tools,
    define_tool,
    fuse_signals,
    is_concurrency_safe,
    openai_tools,
    thaw,
)
from runtime import (
    CodeRuntime,
    Decision,
    HoldCall,
    Journal,
    Limits,
    RunRequest,
    RunResult,
    RunStats,
    ToolCallError,
    current_call,
)
from runtime.lowlevel import tool_call_error

__all__ = (
    "DISPATCH_EVENT",
    "DISPATCH_START_EVENT",
    "CodeMode",
    "CodeModeConfig",
    "CodeModeSession",
    "SdkSection",
)

DISPATCH_START_EVENT = "tool/code-dispatch-start"
DISPATCH_EVENT = "tool/code-dispatch"

#: The session of the ``run_code`` call in progress (set by ``CodeModeSession.run``).
_SESSION: contextvars.ContextVar[CodeModeSession | None] = contextvars.ContextVar(
    "dsh_codemode_session", default=None
)
#: The resume the ``run_code`` call in progress makes (set by ``CodeMode.resume``).
_RESUME: contextvars.ContextVar[tuple[Journal, dict[str, Decision]] | None] = (
    contextvars.ContextVar("dsh_codemode_resume", default=None)
)


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
    max_model_output_bytes: int = 80_000
    """What the model reads of a run (logs and result, or the failure and the logs), in
    UTF-8 bytes (about 20 000 tokens): past it, a head and a tail around one line saying what
    was left out. ``limits.max_output_bytes`` protects the host; this protects the model."""

    def __post_init__(self) -> None:
        budget = self.max_model_output_bytes
        if type(budget) is not int or budget < MIN_MODEL_OUTPUT_BYTES:
            raise ValueError(
                f"max_model_output_bytes must be an int of at least {MIN_MODEL_OUTPUT_BYTES}, "
                f"got {budget!r}"
            )


class SdkSection(msgspec.Struct, frozen=True):
    """The SDK section for one scope: the text the model reads, its hash, and the name map."""

    text: str
    sha256: str
    names: dict[str, str]
    """Escaped Python attribute -> original tool name."""


class CodeMode:
    """Code mode over a registry and a code runtime; installs the reserved ``run_code``."""

    def __init__(
        self,
        registry: ToolRegistry,
        runtime: CodeRuntime,
        config: CodeModeConfig | None = None,
        *,
        keep_output: Callable[[str], str | None] | None = None,
    ) -> None:
        self.registry = registry
        self.runtime = runtime
        self.config = config or CodeModeConfig()
        self.keep_output = keep_output
        """Keeps the whole text of a run the model reads cut, and says where (a path, a
        URI: the line standing for what was left out names it); None keeps nothing."""
        self.language = str(getattr(runtime, "language", "python"))
        """The programs' language, the runtime's: "python" or "typescript"."""
        self._views: dict[tuple[int, ...], ToolView] = {}
        self._ids = itertools.count(1)
        self.definition = define_tool(
            name=RUN_CODE,
            description=self._description,
            parameters=self._parameters,
            execute=self._execute,
            output={
                "schema": {
                    "type": "object",
                    "properties": {
                        "logs": {"type": "array", "items": {"type": "string"}},
                        "result": {},
                        "result_is_repr": {"type": "boolean"},
                        "paused": {"type": "object"},
                    },
                    "required": ["logs"],
                },
                "render": lambda _args, value: (
                    render_paused(value)
                    if "paused" in value
                    else self.model_text(
                        *success_text(
                            value["logs"],
                            value.get("result"),
                            "result" in value,
                            value.get("result_is_repr") is True,
                        )
                    )
                ),
            },
        )
        registry.install_run_code(self.definition)
        self.paused = PausedRuns()
        """The journals of paused runs, for ``resume(run_id)``."""

    # ---- what the model sees -----------------------------------------------------------------

    def _view(self, scope: Scope | None) -> ToolView:
        """The manifest, SDK names and optional-parameter map of ``scope``'s visible tools,
        computed once per set of definitions (definitions are immutable; a set changes when
        a tool is registered, disposed, shadowed or masked, and then has other members)."""
        definitions = tuple(self.registry.visible(scope))
        key = tuple(id(d) for d in definitions)
        view = self._views.pop(key, None)
        if view is None:
            manifest = self.registry.manifest(scope)
            view = ToolView(
                definitions, manifest, sdkgen.python_names(manifest), optional_non_null(manifest)
            )
        self._views[key] = view  # most recently used last
        if len(self._views) > VIEWS_KEPT:
            del self._views[next(iter(self._views))]
        return view

    @property
    def _description(self) -> str:
        name = LANGUAGES.get(self.language, self.language)
        return RUN_CODE_DESCRIPTION.replace("Python", name)

    @property
    def _parameters(self) -> dict[str, Any]:
        return run_code_parameters(LANGUAGES.get(self.language, self.language))

    def sdk(self, scope: Scope | None = None, *, persistent: bool = False) -> SdkSection:
        """The SDK section for ``scope``'s visible tools, in the runtime's language:
        deterministic, byte-identical. ``persistent``: programs run in a session (their
        variables persist), and it says so."""
        view = self._view(scope)
        if self.language == "typescript":
            instructions = TYPESCRIPT_INSTRUCTIONS + ("\n" + PERSISTENT_NOTE if persistent else "")
            declarations = sdkgen.typescript_sdk(view.manifest)
            text = instructions + "\n\n```typescript\n" + declarations + "```\n"
            names = {name: name for name in view.names.values()}
            return SdkSection(text=text, sha256=sdkgen.sdk_hash(text), names=names)
        style = self.config.call_style
        instructions = SYNC_INSTRUCTIONS if style == "sync" else INSTRUCTIONS
        if persistent:
            instructions += "\n" + PERSISTENT_NOTE
        stubs = sdkgen.python_sdk(view.manifest, call_style=style)
        text = instructions + "\n\n```python\n" + stubs + "```\n"
        return SdkSection(text=text, sha256=sdkgen.sdk_hash(text), names=dict(view.names))

    def session(
        self,
        *,
        state: bytes | None = None,
        max_state_bytes: int | None = None,
        commit_on_failure: bool = False,
    ) -> CodeModeSession:
        """A session for one agent: its ``run(code)`` is a ``run_code`` call whose program's
        variables persist to the next call (the runtime must offer sessions);
        ``commit_on_failure`` keeps what a failed call assigned before its exception."""
        opener = getattr(self.runtime, "session", None)
        if opener is None:
            raise TypeError(f"{type(self.runtime).__name__} has no sessions")
        options: dict[str, Any] = {"state": state}
        if max_state_bytes is not None:
            options["max_state_bytes"] = max_state_bytes
        if commit_on_failure:
            options["commit_on_failure"] = True
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
                    description=self._description
                    + "\n\n"
                    + self.sdk(scope, persistent=persistent).text,
                    parameters=self._parameters,
                )
            )
        if format == "openai":
            return openai_tools(schemas)
        if format == "anthropic":
            return anthropic_tools(schemas)
        return [s.to_dict() for s in schemas]

    def model_text(self, text: str, sections: Sections = ()) -> str:
        """``text`` as the model reads it: within ``max_model_output_bytes``."""
        budget = self.config.max_model_output_bytes
        return cut_to_budget(text, budget, sections=sections, keep=self.keep_output).text

    # ---- running ---------------------------------------------------------------------------

    async def _execute(self, args: Any, ctx: ToolRunContext) -> Any:
        images: list[dict[str, Any]] = []
        resume = _RESUME.get()
        journal, decisions = resume if resume is not None else (None, None)
        result = await self.run_program(
            str(args["code"]),
            scope=ctx.scope,
            signal=ctx.signal,
            images=images,
            resume=journal,
            decisions=decisions,
        )
        if result.error is not None:
            raise failure(result, self.model_text)
        if result.paused:
            assert result.journal is not None
            self.paused.keep(result.journal)
            return paused_value(result)
        value: dict[str, Any] = {"logs": list(result.logs)}
        if result.has_value:
            value["result"] = result.value
        if result.value_is_repr:  # the repr() text of a bare last expression that is not JSON
            value["result_is_repr"] = True
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

    async def resume(
        self,
        run: Journal | str,
        *,
        approve: bool | None = None,
        decisions: Mapping[str, Decision] | None = None,
        scope: Scope | None = None,
        signal: AbortSignal | None = None,
        call_id: str | None = None,
    ) -> ToolResult:
        """Resume a paused run (its journal, or the run id a paused ``run_code`` gave) as a
        ``run_code`` call: the program is replayed, its earlier calls answered from the
        journal, and each held call executed (``approve=True``) or refused (``False``);
        ``decisions`` decide held calls one by one (call id -> "allow" or "deny")."""
        journal = self.paused.take(run)
        token = _RESUME.set((journal, resume_decisions(journal, approve, decisions)))
        try:
            return await self.run(journal.program, scope=scope, signal=signal, call_id=call_id)
        finally:
            _RESUME.reset(token)

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
        resume: Journal | None = None,
        decisions: Mapping[str, Decision] | None = None,
    ) -> RunResult:
        """Run a program with the scope's tools bound under ``tools.``; the raw run result.

        Unfinished sub-calls are aborted and drained before this returns. ``images``, if
        given, collects the image parts of the calls' results, in call order. ``resume``:
        the journal of a run of ``code`` to replay first (``decisions`` for its held calls).
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
                recorded = len(resume.calls) if resume is not None else 0
                bindings = self._bindings(scope, sub_signal, calls, on_call, images, recorded)
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
                target: Any = self.runtime
                if session is not None and session.codemode is self:
                    target = session.runtime_session
                # only a resume passes the journal: a runtime of before durable runs still runs
                if resume is None:
                    result: RunResult = await target.run(request)
                else:
                    result = await target.run(request, resume=resume, decisions=decisions)
                # unfinished calls: ABORTED (a sync tool deaf to it is abandoned, not waited for)
                controller.abort(RunSettled("the program's run settled"))
            return result
        finally:
            if unlink is not None:
                unlink()

    def _preflight(self, code: str, scope: Scope | None) -> RunResult | None:
        from runtime import RunError

        manifest = self._view(scope).manifest
        if self.language == "typescript":
            from host.sandbox import deno_binary

            diagnostics = sdkgen.check_typescript(code, manifest, deno=deno_binary())
        else:
            diagnostics = sdkgen.check_program(code, manifest, call_style=self.config.call_style)
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
        recorded: int = 0,
    ) -> dict[str, Any]:
        view = self._view(scope)
        names, optional_non_null = view.names, view.optional_non_null
        scheduler = SubCallScheduler(self.config.limits.max_parallel_sub_calls)
        # shared by every binding of this run; a resumed run made its recorded calls already
        calls_left = [self.config.max_tool_calls - recorded]
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
                    if result.error.code == ErrorCode.PAUSED:
                        raise HoldCall(pause_reason(result))  # the run pauses on this call
                    raise tool_call_error(  # a builtin type the tool raised stays that type
                        tool, result.error.message, str(result.error.code), result.error.name
                    )
                return thaw(result.value)

            return binding

        if self.language == "typescript":  # the TypeScript SDK keeps the tools' own names
            return {f"tools.{original}": make(original) for original in names.values()}
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
                tool,
                args,
                scope=scope,
                signal=signal,
                call_id=call_id,
                approved=info is not None and info.approved,
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

    async def resume(self, run: Journal | str, **options: Any) -> ToolResult:
        """``CodeMode.resume`` in this session: a paused step committed nothing; its resume
        commits as a step does."""
        token = _SESSION.set(self)
        try:
            return await self.codemode.resume(run, **options)
        finally:
            _SESSION.reset(token)

    async def __aenter__(self) -> CodeModeSession:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        return None
