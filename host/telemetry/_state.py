"""The state the traced and untraced paths share: the call in progress, the run's trace."""

from __future__ import annotations

import contextvars
from dataclasses import dataclass
from typing import Any, Protocol

from runtime import RunRequest, RunResult

__all__ = (
    "CALLS_TRACED_ELSEWHERE",
    "CURRENT_TOOL_CALL",
    "RunTrace",
    "RuntimeFacts",
    "ToolCallNote",
)


class RuntimeFacts(Protocol):
    """What ``trace_run`` reads of a runtime (every ``CodeRuntime`` has it)."""

    @property
    def language(self) -> str: ...

    @property
    def isolation(self) -> str: ...


@dataclass(eq=False)
class ToolCallNote:
    """The binding call in progress, as its span sees it (its name, and whether it was asked)."""

    name: str
    call_id: str | None
    asked: bool = False
    span: Any = None


#: The binding call in progress, while tracing or metrics are on (set around the binding).
CURRENT_TOOL_CALL: contextvars.ContextVar[ToolCallNote | None] = contextvars.ContextVar(
    "dsh_code_tool_call", default=None
)
#: Set where a run's binding calls are traced by its caller (a Ray node's runs).
CALLS_TRACED_ELSEWHERE: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "dsh_code_calls_traced_elsewhere", default=False
)


class RunTrace:
    """One run's span and metrics, for a backend's ``run()``::

        with trace_run(self, request) as traced:
            result = await self._run(traced.request)  # bindings wrapped, run_id set
            traced.end(result)
        return result

    Untraced (no tracer and no meter anywhere) it hands back the request as it came and
    does nothing else. An exception leaving the block ends the span with it.
    """

    __slots__ = ("request",)

    def __init__(self, request: RunRequest) -> None:
        self.request = request
        """The request to run: with tracing on, its bindings trace each call."""

    def __enter__(self) -> RunTrace:
        return self

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        return None

    def end(self, result: RunResult) -> None:
        """Record the run's outcome and figures, and end its span."""
