"""What hooks see and return: the call, the pre- and post-execute decisions, the hook types."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from ._definition import ToolDefinition
from ._result import ToolResult
from ._schema import MISSING
from ._scope import Scope
from ._signal import AbortSignal

__all__ = (
    "Allow",
    "Ask",
    "AskHandler",
    "Decision",
    "Deny",
    "ExecuteWrapper",
    "Guard",
    "NextFn",
    "Observer",
    "Pause",
    "PostDecision",
    "PostExecuteHook",
    "PreExecuteHook",
    "ToolCall",
    "ToolResultEvent",
)


@dataclass(frozen=True, slots=True)
class ToolCall:
    """One invocation as hooks see it: name, frozen args, ids, scope, signal and definition."""

    name: str
    args: Any
    call_id: str | None
    scope: Scope
    signal: AbortSignal
    definition: ToolDefinition | None
    approved: bool = False
    """A person allowed this call already (the resume of a paused run): ``Ask`` and
    ``Pause`` decisions let it through."""


@dataclass(frozen=True, slots=True)
class Allow:
    """A pre-execute decision: let the call through."""


@dataclass(frozen=True, slots=True)
class Deny:
    """A pre-execute decision: refuse the call with ``reason``."""

    reason: str


@dataclass(frozen=True, slots=True)
class Ask:
    """A pre-execute decision: ask the host's ask handler, with ``prompt``."""

    prompt: str


@dataclass(frozen=True, slots=True)
class Pause:
    """A decision: hold the call, not now, with ``reason``. In code mode the run pauses (its
    result lists the call, its journal lets it resume); a plain call gets ``PAUSED``. A
    pre-execute hook, a guard or the ask handler may give it."""

    reason: str


Decision = Allow | Deny | Ask | Pause


@dataclass(frozen=True, slots=True, kw_only=True)
class PostDecision:
    """A post-execute decision: replace content or value, block, attach ordered contexts."""

    content: Any = MISSING
    value: Any = MISSING
    block: str | None = None
    additional_contexts: tuple[Any, ...] = field(default=())


@dataclass(frozen=True, slots=True)
class ToolResultEvent:
    """The payload of the ``result`` event: the call and its frozen final result."""

    call: ToolCall
    result: ToolResult


class NextFn(Protocol):
    """``await next_(signal=None)``: run the inner layers; a wrapper may only pass a new signal."""

    def __call__(self, signal: AbortSignal | None = None) -> Awaitable[ToolResult]: ...


PreExecuteHook = Callable[[ToolCall, Decision], Decision | Awaitable[Decision | None] | None]
"""``(call, decision) -> Allow | Deny | Ask | Pause | None``, maybe async; None keeps it."""

Guard = Callable[[ToolCall], str | Pause | None]
"""``(call) -> reason | Pause | None``, synchronous; a reason rejects the call."""

ExecuteWrapper = Callable[[ToolCall, NextFn], Awaitable[ToolResult]]
"""``async (call, next_) -> ToolResult`` around dispatch."""

PostExecuteHook = Callable[
    [ToolCall, ToolResult], PostDecision | Awaitable[PostDecision | None] | None
]
"""``(call, result) -> PostDecision | None``, maybe async."""

AskHandler = Callable[[ToolCall, Ask], "bool | Deny | Pause | Awaitable[bool | Deny | Pause]"]
"""``(call, ask) -> bool | Deny | Pause``, maybe async; only ``True`` approves the call, a
``Deny`` says why it was not (nobody could be asked, ...), a ``Pause`` holds it (no answer
yet)."""

Observer = Callable[[Any], None]
"""A synchronous observer of a named event; each event has its own payload type."""
