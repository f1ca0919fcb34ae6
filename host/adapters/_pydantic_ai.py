"""``DshCodeToolset``: a pydantic-ai toolset offering one ``run_code`` tool over other toolsets."""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import anyio
from pydantic import TypeAdapter
from pydantic_ai import ModelRetry, RunContext
from pydantic_ai.exceptions import (
    ApprovalRequired,
    CallDeferred,
    ToolFailed,
    UnexpectedModelBehavior,
)
from pydantic_ai.messages import ToolCallPart, ToolReturn
from pydantic_ai.tool_manager import ToolManager
from pydantic_ai.tools import ToolDefinition, ToolDenied
from pydantic_ai.toolsets import AbstractToolset, CombinedToolset, ToolsetTool, WrapperToolset
from typing_extensions import TypedDict

from host.adapters._program import jsonable
from host.adapters._runtime import shared_runtime
from host.adapters._steps import make_limits
from host.sandbox import Session
from host.telemetry import name_tool_call
from runtime import Decision, HoldCall, Journal, Limits, RunRequest, RunResult, current_call
from runtime.lowlevel import builtin_exception_name, tool_call_error
from sdkgen import python_names, python_sdk

__all__ = ("DshCodeToolset",)


class _RunCodeArgs(TypedDict):
    code: str


_ARGS = TypeAdapter(_RunCodeArgs)
_ids = itertools.count(1)
#: Paused runs a toolset keeps for their approval (the oldest go first).
_PAUSED_KEPT = 256

_DESCRIPTION = """Run a Python program in a fresh sandboxed process and return its result.

Call tools with `await tools.<name>(keyword=value)`; a failed call raises `ToolCallError`
(`.tool`, `.code`, `.message`). The value of a top-level `return` (or of a last bare
expression) is the result, as JSON; `print` output comes back as `logs`. Top-level
variables survive to the next `run_code` call of this agent run.

The `tools` module:

```python
{sdk}
```"""


@dataclass
class _Waiting:
    """A call of the program waiting for a person (an approval) or for the caller (deferred)."""

    tool: str
    args: dict[str, Any]
    metadata: dict[str, Any] | None
    kind: str = "unapproved"


@dataclass
class _Program:
    """What one run of a program did that ``run_code`` answers for once it has ended."""

    approval_metadata: Any
    stop: anyio.Event = field(default_factory=anyio.Event)
    waiting: list[_Waiting] = field(default_factory=list)
    escaped: list[BaseException] = field(default_factory=list)
    """What must reach the caller as pydantic-ai lets it (a bug in a tool, retries spent)."""
    terminal: list[ToolFailed] = field(default_factory=list)
    failed: set[str] = field(default_factory=set)
    succeeded: set[str] = field(default_factory=set)

    def halt(self) -> None:
        """The program stops at its next call (a deferred call: the caller answers for it)."""
        self.stop.set()


@dataclass
class DshCodeToolset(WrapperToolset[Any]):
    """Offer the wrapped toolset's tools to the model as one ``run_code`` tool (code mode).

    The program calls them as ``await tools.x(...)``; every call goes through pydantic-ai's
    own tool execution (validation, ``ModelRetry`` within the tool's own retry budget,
    approvals): a call needing approval pauses the program and defers ``run_code``
    (``DeferredToolRequests``, the tool's metadata kept), and once approved the program
    resumes by replay: its earlier calls are answered from the run's journal (none runs
    again) and the approved call runs (the approval's metadata reaching the tool); a
    deferred or external call defers ``run_code`` too, the caller's answer its result. Variables persist across ``run_code``
    calls of one agent run (a session per run). A failed program is a ``ModelRetry``, so the
    model reads its traceback and tries again; one that ends on a tool's ``ToolFailed`` is a
    ``ToolFailed``; a bug in a tool is raised to the caller.
    """

    limits: Limits | None = None
    tool_name: str = "run_code"
    max_retries: int = 3
    max_state_bytes: int = 64 * 1024 * 1024
    runtime_options: Mapping[str, Any] = field(default_factory=dict)
    _session: Session | None = field(default=None, repr=False)
    _paused: dict[str, tuple[Journal, bytes]] = field(default_factory=dict, repr=False)
    """Paused runs by ``run_code`` call id: the journal, and the state the run started from."""
    _retries: dict[str, int] = field(default_factory=dict, repr=False)
    """The wrapped tools' retries so far in this agent run, counted as pydantic-ai counts."""

    @classmethod
    def over(
        cls, toolsets: AbstractToolset[Any] | Sequence[AbstractToolset[Any]], **options: Any
    ) -> DshCodeToolset:
        """A ``DshCodeToolset`` over one toolset or several (combined)."""
        if isinstance(toolsets, AbstractToolset):
            return cls(toolsets, **options)
        return cls(CombinedToolset(list(toolsets)), **options)

    def __post_init__(self) -> None:
        if self.limits is None:
            self.limits = make_limits(
                None,
                compute_ms=None,
                max_wall_ms=None,
                max_heap_mb=None,
                max_output_bytes=None,
                max_parallel_sub_calls=None,
            )

    @property
    def id(self) -> str | None:
        return None

    async def for_run(self, ctx: RunContext[Any]) -> AbstractToolset[Any]:
        """A copy for this agent run: its own session, so runs do not share variables."""
        return replace(self, wrapped=await self.wrapped.for_run(ctx), _session=None, _retries={})

    async def get_tools(self, ctx: RunContext[Any]) -> dict[str, ToolsetTool[Any]]:

        inner = await self.wrapped.get_tools(ctx)
        manifest = [
            {
                "name": name,
                "description": tool.tool_def.description or "",
                "parameters": tool.tool_def.parameters_json_schema,
                **(
                    {"output": tool.tool_def.return_schema}
                    if tool.tool_def.return_schema is not None
                    else {}
                ),
            }
            for name, tool in inner.items()
        ]
        sdk = python_sdk(manifest, call_style="async").strip()
        tool_def = ToolDefinition(
            name=self.tool_name,
            description=_DESCRIPTION.format(sdk=sdk),
            parameters_json_schema=_ARGS.json_schema(),
        )
        return {
            self.tool_name: ToolsetTool(
                toolset=self,
                tool_def=tool_def,
                max_retries=self.max_retries,
                args_validator=_ARGS.validator,  # type: ignore[arg-type]
            )
        }

    async def call_tool(
        self, name: str, tool_args: dict[str, Any], ctx: RunContext[Any], tool: ToolsetTool[Any]
    ) -> Any:
        """Run the program; its result, or ``ModelRetry`` with the failure."""

        # The nested manager writes itself into the context it gets; its retries are the
        # wrapped tools' own, so each tool sees its real ctx.retry and spends its own budget.
        inner_ctx = replace(ctx, retries=dict(self._retries))
        manager = await ToolManager(toolset=self.wrapped).for_run_step(inner_ctx)
        assert manager.tools is not None
        names = python_names(
            [
                {"name": n, "parameters": t.tool_def.parameters_json_schema}
                for n, t in manager.tools.items()
            ]
        )
        call_id = ctx.tool_call_id or ""
        resumed = ctx.tool_call_approved
        paused = self._paused.pop(call_id, None) if resumed else None
        if paused is not None and paused[0].program != tool_args["code"]:
            paused = None  # approved with other code (override_args): a run of its own
        program = _Program(approval_metadata=ctx.tool_call_metadata if resumed else None)
        bindings = {
            f"tools.{escaped}": self._binding(manager, original, program)
            for escaped, original in names.items()
        }
        request = RunRequest(
            program=tool_args["code"],
            bindings=bindings,
            limits=self.limits
            or make_limits(
                None,
                compute_ms=None,
                max_wall_ms=None,
                max_heap_mb=None,
                max_output_bytes=None,
                max_parallel_sub_calls=None,
            ),
            call_style="async",
            abort=program.stop,
        )
        session = await self._get_session(paused[1] if paused is not None else None)
        started_from = session.state
        if paused is None:
            result = await session.run(request)
        else:  # approved: replay the run, its held calls allowed
            journal = paused[0]
            allow: dict[str, Decision] = {held.call_id: "allow" for held in journal.pending}
            result = await session.run(request, resume=journal, decisions=allow)
        if program.escaped:
            raise program.escaped[0]
        if result.paused and result.journal is not None:
            self._paused[call_id] = (result.journal, started_from)
            while len(self._paused) > _PAUSED_KEPT:
                del self._paused[next(iter(self._paused))]
        if program.waiting:
            raise _deferral(program.waiting)
        self._count_retries(program)
        return _answer(result, program)

    def _count_retries(self, program: _Program) -> None:
        """As pydantic-ai carries retries to the next step: a success resets, a failure adds."""
        counts = {n: c for n, c in self._retries.items() if n not in program.succeeded}
        counts.update({n: self._retries.get(n, 0) + 1 for n in program.failed})
        self._retries.clear()
        self._retries.update(counts)

    def _binding(self, manager: ToolManager[Any], tool: str, program: _Program) -> Any:

        async def call(args: Any) -> Any:
            name_tool_call(tool)  # the runtime's span knows the binding, not the tool
            kwargs = args if isinstance(args, dict) else {}
            info = current_call.get()
            allowed = info is not None and info.approved  # a person approved it: resumed
            part = ToolCallPart(tool_name=tool, args=kwargs, tool_call_id=f"dsh-code-{next(_ids)}")
            try:
                value = await manager.handle_call(
                    part,
                    approved=allowed,
                    metadata=program.approval_metadata if allowed else None,
                    wrap_validation_errors=False,
                )
            except ApprovalRequired as exc:
                program.waiting.append(_Waiting(tool, dict(kwargs), exc.metadata))
                raise HoldCall(f"{tool} needs a person's approval") from exc  # the run pauses
            except CallDeferred as exc:
                program.waiting.append(_Waiting(tool, dict(kwargs), exc.metadata, exc.kind))
                program.halt()  # the program stops here: the caller answers for run_code
                raise tool_call_error(tool, "deferred to the caller", "DENIED") from exc
            except ModelRetry as exc:
                program.failed.add(tool)
                spent = self._retries.get(tool, 0)
                budget = manager.tools[tool].max_retries if manager.tools else 0
                if spent >= budget:  # as pydantic-ai ends a run whose tool spent its retries
                    program.escaped.append(_retries_spent(tool, budget, exc))
                    program.halt()
                raise tool_call_error(tool, exc.message, "TOOL_ERROR") from exc
            except ToolFailed as exc:  # terminal: no retry budget spent
                program.terminal.append(exc)
                raise tool_call_error(tool, exc.message, "TOOL_ERROR") from exc
            except Exception as exc:
                if type(exc).__name__ != "ValidationError":
                    program.escaped.append(exc)  # a bug in the tool: the caller's, as usual
                    program.halt()
                    raise tool_call_error(tool, "the tool failed", "TOOL_ERROR") from exc
                program.failed.add(tool)
                raise tool_call_error(
                    tool, str(exc), "INVALID_ARGS", builtin_exception_name(exc)
                ) from exc
            if isinstance(value, ToolDenied):
                raise tool_call_error(tool, value.message, "DENIED")
            program.succeeded.add(tool)
            if isinstance(value, ToolReturn):
                value = value.return_value
            return _to_json(value)

        return call

    async def _get_session(self, state: bytes | None = None) -> Session:
        """This agent run's session (``state``: resume one from the state a paused run began
        with; a paused run committed nothing)."""
        if self._session is None or state is not None:
            runtime = await shared_runtime(**self.runtime_options)
            self._session = runtime.session(state=state, max_state_bytes=self.max_state_bytes)
        return self._session


def _deferral(waiting: list[_Waiting]) -> Exception:
    """``run_code`` deferred for the calls that wait: approvals first (the run resumes)."""
    approvals = [w for w in waiting if w.kind == "unapproved"]
    shown = approvals or waiting
    calls = [
        {"tool": w.tool, "args": w.args, **({"metadata": w.metadata} if w.metadata else {})}
        for w in shown
    ]
    # The first call's own metadata stays at the top, as it would outside code mode.
    metadata = {**(shown[0].metadata or {}), "calls": calls}
    if approvals:
        return ApprovalRequired(metadata=metadata)
    if shown[0].kind == "question":
        return CallDeferred(metadata=metadata, kind="question")
    return CallDeferred(metadata=metadata)


def _to_json(value: Any) -> Any:
    """A tool's return value as JSON (pydantic models and dataclasses dumped)."""
    try:
        return TypeAdapter(Any).dump_python(value, mode="json")
    except Exception:
        return jsonable(value)


def _retries_spent(tool: str, budget: int, cause: ModelRetry) -> UnexpectedModelBehavior:
    error = UnexpectedModelBehavior(
        f"Tool {tool!r} exceeded max retries count of {budget}. Consider raising the retry "
        "limit, or see the docs on tool retries: "
        "https://pydantic.dev/docs/ai/tools-toolsets/tools-advanced/#tool-retries"
    )
    error.__cause__ = cause
    return error


def _answer(result: RunResult, program: _Program) -> Any:
    if result.error is not None:
        error = result.error
        text = error.message if error.kind == "exception" else f"{error.kind}: {error.message}"
        if result.logs:
            text += "\nlogs so far:\n" + "\n".join(result.logs)
        if program.terminal and error.kind == "exception":
            raise ToolFailed(f"the program failed: {text}")  # it ended on a terminal failure
        raise ModelRetry(f"the program failed: {text}")
    out: dict[str, Any] = {"logs": list(result.logs)}
    if result.has_value:
        out["result"] = result.value
    return out
