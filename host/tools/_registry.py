"""The registry: tools by scope, the hook and event registration, and ``invoke``."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ._batch import ToolCallRequest, run_tool_calls
from ._call import (
    AskHandler,
    ExecuteWrapper,
    Guard,
    Observer,
    PostExecuteHook,
    PreExecuteHook,
)
from ._config import MODES, Disposer, PresentationMode, ToolsConfig
from ._definition import ToolDefinition
from ._exceptions import ReservedToolNameError, ScopeError, ToolDefinitionError
from ._hooks import Events, Hooks
from ._pipeline import Invocation
from ._plugins import RepeatToolReminder, timeout_policy
from ._result import ToolResult
from ._schema import to_json_schema
from ._scope import RUN_CODE, Scope, add_tool, resolve, tool_names
from ._signal import AbortSignal

__all__ = ("ToolRegistry", "ToolSchema")


@dataclass(frozen=True, slots=True)
class ToolSchema:
    """What the model sees of a tool: name, description, JSON Schemas (no executor)."""

    name: str
    description: str
    parameters: dict[str, Any]
    output: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        """Return ``{name, description, parameters, output?}`` (the manifest entry)."""
        out = {"name": self.name, "description": self.description, "parameters": self.parameters}
        if self.output is not None:
            out["output"] = self.output
        return out


class ToolRegistry:
    """Tools by scope, the pipeline hooks, named events, and ``invoke``."""

    def __init__(
        self,
        config: ToolsConfig | None = None,
        *,
        ask_handler: AskHandler | None = None,
    ) -> None:
        self.config = config or ToolsConfig()
        if self.config.mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {self.config.mode!r}")
        self.root = Scope(self, None, "global")
        self._agents = itertools.count(1)
        self._run_code: ToolDefinition | None = None
        self._hooks = Hooks(ask_handler)
        self._events = Events()
        self.reminder: RepeatToolReminder | None = None
        self._install_plugins()

    def _install_plugins(self) -> None:
        if self.config.timeout_policy:
            # Without a tool's timeout_ms the policy only calls next(): skip it for such tools.
            self._hooks.wrappers.add(timeout_policy, -1000, timed_only=True)
        if self.config.repeat_reminder is not None:
            self.reminder = RepeatToolReminder(self.config.repeat_reminder)
            self.reminder.install(self)

    @property
    def ask_handler(self) -> AskHandler | None:
        """The host's handler of ``Ask`` decisions ``(call, ask) -> bool`` (maybe async)."""
        return self._hooks.ask_handler

    @ask_handler.setter
    def ask_handler(self, handler: AskHandler | None) -> None:
        self._hooks.ask_handler = handler

    # -- scopes and definitions ------------------------------------------------------------

    def agent_scope(self, parent: Scope | None = None, *, label: str | None = None) -> Scope:
        """Create an agent scope under ``parent`` (default: the global scope)."""
        parent = parent or self.root
        if parent.registry is not self:
            raise ScopeError("the parent scope belongs to another registry")
        return Scope(self, parent, label or f"agent-{next(self._agents)}")

    def register(self, definition: ToolDefinition, *, scope: Scope | None = None) -> Disposer:
        """Register ``definition`` in ``scope`` (default global); return a disposer."""
        scope = self._scope(scope)
        if not isinstance(definition, ToolDefinition):
            raise ToolDefinitionError(f"not a tool definition: {definition!r}")
        if definition.name == RUN_CODE:
            raise ReservedToolNameError(f"{RUN_CODE!r} is reserved and cannot be registered")
        return add_tool(scope, definition)

    def install_run_code(self, definition: ToolDefinition) -> None:
        """Install the reserved ``run_code`` tool, once, for code mode; it cannot be removed."""
        if definition.name != RUN_CODE:
            raise ToolDefinitionError(f"install_run_code needs a tool named {RUN_CODE!r}")
        if self._run_code is not None:
            raise ReservedToolNameError(f"{RUN_CODE!r} is already installed")
        self._run_code = definition

    def _scope(self, scope: Scope | None) -> Scope:
        if scope is None:
            return self.root
        if scope.registry is not self:
            raise ScopeError("the scope belongs to another registry")
        return scope

    def get(self, name: str, scope: Scope | None = None) -> ToolDefinition | None:
        """The definition ``name`` resolves to in ``scope`` (shadowing and masks applied)."""
        if name == RUN_CODE:
            return self._run_code
        return resolve(self._scope(scope), name)

    def visible(self, scope: Scope | None = None) -> list[ToolDefinition]:
        """Every tool visible in ``scope`` except ``run_code``, sorted by name."""
        found = (self.get(name, scope) for name in sorted(set(tool_names(self._scope(scope)))))
        return [definition for definition in found if definition is not None]

    def schemas(self, scope: Scope | None = None) -> list[ToolSchema]:
        """The visible tools' schemas (no executors), sorted by name, without ``run_code``."""
        return [
            ToolSchema(
                definition.name,
                definition.description,
                to_json_schema(definition.parameters),
                None if definition.output is None else to_json_schema(definition.output.schema),
            )
            for definition in self.visible(scope)
        ]

    def manifest(self, scope: Scope | None = None) -> list[dict[str, Any]]:
        """The SDK generator's manifest: ``[{name, description, parameters, output?}]`` by name."""
        return [entry.to_dict() for entry in self.schemas(scope)]

    def mode(self, scope: Scope | None = None) -> PresentationMode:
        """The effective presentation mode of ``scope``."""
        return self._scope(scope).mode

    # -- hooks and events ------------------------------------------------------------------

    def pre_execute(self, hook: PreExecuteHook, *, order: int = 0) -> Disposer:
        """Add a pre-execute hook ``(call, decision) -> Allow | Deny | Ask | None``, maybe async."""
        return self._hooks.pre_execute.add(hook, order)

    def guard(self, guard: Guard) -> Disposer:
        """Add a synchronous guard ``(call) -> reason | None``; a reason rejects the call."""
        return self._hooks.guards.add(guard)

    def wrap_execute(self, wrapper: ExecuteWrapper, *, order: int = 0) -> Disposer:
        """Add a wrapper ``async (call, next) -> ToolResult`` around dispatch (low order: outer)."""
        return self._hooks.wrappers.add(wrapper, order)

    def post_execute(self, hook: PostExecuteHook, *, order: int = 0) -> Disposer:
        """Add a post-execute hook ``(call, result) -> PostDecision | None`` (may be async)."""
        return self._hooks.post_execute.add(hook, order)

    def on(self, event: str, callback: Observer) -> Disposer:
        """Observe a named event (``result``, ``agent/pre-step``, …); return a disposer."""
        return self._events.on(event, callback)

    def emit(self, event: str, payload: object) -> None:
        """Publish a named event to its observers (``agent/pre-step`` takes the agent scope)."""
        self._events.emit(event, payload)

    # -- invocation ------------------------------------------------------------------------

    async def invoke(
        self,
        name: str,
        args: Any,
        *,
        scope: Scope | None = None,
        signal: AbortSignal | None = None,
        call_id: str | None = None,
        approved: bool = False,
    ) -> ToolResult:
        """Run one call through the whole pipeline and return its frozen result; never raises
        for what the call did.

        ``scope``: where ``name`` resolves (default global); ``signal``: the caller's
        cancellation; ``call_id``: an id passed to hooks, the body and the ``result`` event;
        ``approved``: a person allowed the call already (``Ask`` and ``Pause`` let it through).
        """
        invocation = self.begin(
            name, args, scope=scope, signal=signal, call_id=call_id, approved=approved
        )
        await invocation.prepare()
        await invocation.dispatch()
        return await invocation.finish()

    def begin(
        self,
        name: str,
        args: Any,
        *,
        scope: Scope | None = None,
        signal: AbortSignal | None = None,
        call_id: str | None = None,
        approved: bool = False,
    ) -> Invocation:
        """Start an invocation; a scheduler runs ``prepare``, ``dispatch`` and ``finish``."""
        return Invocation(
            self,
            self._hooks,
            self._events,
            name=name,
            args=args,
            scope=self._scope(scope),
            signal=signal or AbortSignal(),
            call_id=call_id,
            approved=approved,
        )

    async def invoke_batch(
        self,
        calls: Sequence[ToolCallRequest],
        *,
        scope: Scope | None = None,
        signal: AbortSignal | None = None,
        max_parallel: int | None = None,
    ) -> list[ToolResult]:
        """Run one model step's calls (``ToolCallRequest``s): see ``run_tool_calls``."""
        return await run_tool_calls(
            self, calls, scope=scope, signal=signal, max_parallel=max_parallel
        )
