"""``DshCodeToolset``: a pydantic-ai toolset offering one ``run_code`` tool over other toolsets."""

from __future__ import annotations

import itertools
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import anyio
from pydantic import TypeAdapter
from pydantic_ai import ModelRetry, RunContext
from pydantic_ai.exceptions import ApprovalRequired, CallDeferred
from pydantic_ai.messages import ToolCallPart, ToolReturn
from pydantic_ai.tool_manager import ToolManager
from pydantic_ai.tools import ToolDefinition, ToolDenied
from pydantic_ai.toolsets import AbstractToolset, CombinedToolset, ToolsetTool, WrapperToolset
from typing_extensions import TypedDict

from host.adapters._steps import make_limits
from host.telemetry import name_tool_call

if TYPE_CHECKING:
    from host.sandbox import Session
    from runtime import Limits, RunResult

__all__ = ("DshCodeToolset",)


class _RunCodeArgs(TypedDict):
    code: str


_ARGS = TypeAdapter(_RunCodeArgs)
_ids = itertools.count(1)

_DESCRIPTION = """Run a Python program in a fresh sandboxed process and return its result.

Call tools with `await tools.<name>(keyword=value)`; a failed call raises `ToolCallError`
(`.tool`, `.code`, `.message`). The value of a top-level `return` (or of a last bare
expression) is the result, as JSON; `print` output comes back as `logs`. Top-level
variables survive to the next `run_code` call of this agent run.

The `tools` module:

```python
{sdk}
```"""


class _InnerError(Exception):
    """An inner tool failed: ``ToolCallError`` in the program, with this code."""

    def __init__(self, tool: str, message: str, code: str) -> None:
        super().__init__(message)
        self.tool, self.message, self.code = tool, message, code


@dataclass
class _Approval:
    """A call of the program waiting for a person."""

    tool: str
    args: dict[str, Any]


@dataclass
class DshCodeToolset(WrapperToolset[Any]):
    """Offer the wrapped toolset's tools to the model as one ``run_code`` tool (code mode).

    The program calls them as ``await tools.x(...)``; every call goes through pydantic-ai's
    own tool execution (validation, ``ModelRetry``, approvals): a call needing approval
    stops the program and defers ``run_code`` (``DeferredToolRequests``), and once
    approved the program runs again with that call allowed. Variables persist across
    ``run_code`` calls of one agent run (a session per run). A failed program is a
    ``ModelRetry``, so the model reads its traceback and tries again.
    """

    limits: Limits | None = None
    tool_name: str = "run_code"
    max_retries: int = 3
    max_state_bytes: int = 64 * 1024 * 1024
    runtime_options: Mapping[str, Any] = field(default_factory=dict)
    _session: Session | None = field(default=None, repr=False)
    _approved: dict[str, list[tuple[str, str]]] = field(default_factory=dict, repr=False)

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
        return replace(self, wrapped=await self.wrapped.for_run(ctx), _session=None)

    async def get_tools(self, ctx: RunContext[Any]) -> dict[str, ToolsetTool[Any]]:
        import sdkgen

        inner = await self.wrapped.get_tools(ctx)
        manifest = [
            {
                "name": name,
                "description": tool.tool_def.description or "",
                "parameters": tool.tool_def.parameters_json_schema,
            }
            for name, tool in inner.items()
        ]
        sdk = sdkgen.python_sdk(manifest, call_style="async").strip()
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
        import sdkgen
        from runtime import RunRequest

        inner_ctx = replace(ctx)  # the nested manager writes itself into the context it gets
        manager = await ToolManager(toolset=self.wrapped).for_run_step(inner_ctx)
        assert manager.tools is not None
        names = sdkgen.python_names(
            [
                {"name": n, "parameters": t.tool_def.parameters_json_schema}
                for n, t in manager.tools.items()
            ]
        )
        call_id = ctx.tool_call_id or ""
        approved = self._approved.pop(call_id, []) if ctx.tool_call_approved else []
        waiting: list[_Approval] = []
        stop = anyio.Event()
        bindings = {
            f"tools.{escaped}": self._binding(manager, original, approved, waiting, stop)
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
            abort=stop,
        )
        result = await (await self._get_session()).run(request)
        if waiting:
            self._approved[call_id] = [(w.tool, _key(w.args)) for w in waiting]
            raise ApprovalRequired(
                metadata={"calls": [{"tool": w.tool, "args": w.args} for w in waiting]}
            )
        return _answer(result)

    def _binding(
        self,
        manager: ToolManager[Any],
        tool: str,
        approved: list[tuple[str, str]],
        waiting: list[_Approval],
        stop: anyio.Event,
    ) -> Any:
        async def call(args: Any) -> Any:
            name_tool_call(tool)  # the runtime's span knows the binding, not the tool
            kwargs = args if isinstance(args, dict) else {}
            key = (tool, _key(kwargs))
            allowed = key in approved
            part = ToolCallPart(tool_name=tool, args=kwargs, tool_call_id=f"dsh-code-{next(_ids)}")
            try:
                value = await manager.handle_call(
                    part, approved=allowed, wrap_validation_errors=False
                )
            except (ApprovalRequired, CallDeferred) as exc:
                if isinstance(exc, CallDeferred):
                    raise _InnerError(
                        tool, "the tool defers its call: not in code mode", "DENIED"
                    ) from exc
                waiting.append(_Approval(tool, dict(kwargs)))
                stop.set()  # the program stops here; it runs again once approved
                raise _InnerError(tool, "waiting for approval", "DENIED") from exc
            except ModelRetry as exc:
                raise _InnerError(tool, exc.message, "TOOL_ERROR") from exc
            except Exception as exc:
                if type(exc).__name__ == "ValidationError":
                    raise _InnerError(tool, str(exc), "INVALID_ARGS") from exc
                raise _InnerError(tool, str(exc) or type(exc).__name__, "TOOL_ERROR") from exc
            if isinstance(value, ToolDenied):
                raise _InnerError(tool, value.message, "DENIED")
            if isinstance(value, ToolReturn):
                value = value.return_value
            return _to_json(value)

        return call

    async def _get_session(self) -> Session:
        if self._session is None:
            from host.adapters import shared_runtime

            runtime = await shared_runtime(**self.runtime_options)
            self._session = runtime.session(max_state_bytes=self.max_state_bytes)
        return self._session


def _key(args: Mapping[str, Any]) -> str:
    return json.dumps(args, sort_keys=True, default=str)


def _to_json(value: Any) -> Any:
    """A tool's return value as JSON (pydantic models and dataclasses dumped)."""
    from host.adapters._program import jsonable

    try:
        return TypeAdapter(Any).dump_python(value, mode="json")
    except Exception:
        return jsonable(value)


def _answer(result: RunResult) -> Any:
    if result.error is not None:
        error = result.error
        text = error.message if error.kind == "exception" else f"{error.kind}: {error.message}"
        if result.logs:
            text += "\nlogs so far:\n" + "\n".join(result.logs)
        raise ModelRetry(f"the program failed: {text}")
    out: dict[str, Any] = {"logs": list(result.logs)}
    if result.has_value:
        out["result"] = result.value
    return out
