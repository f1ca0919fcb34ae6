"""The scheduler for one model step's tool calls: parallel runs, exclusive barriers, model order."""

from __future__ import annotations

import inspect
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import anyio

from ._config import ToolsConfig
from ._pipeline import Invocation, ToolResolver
from ._result import ToolResult
from ._scope import Scope
from ._signal import AbortSignal
from ._validate import validate

__all__ = ("BatchHost", "ToolCallRequest", "is_concurrency_safe", "run_tool_calls")

_log = logging.getLogger("host.tools")


@dataclass(frozen=True, slots=True)
class ToolCallRequest:
    """One call of a model step: tool name, arguments, optional call id."""

    name: str
    args: Any
    call_id: str | None = None


class BatchHost(ToolResolver, Protocol):
    """What the scheduler needs from a registry: names resolved, invocations begun, settings."""

    @property
    def root(self) -> Scope: ...

    @property
    def config(self) -> ToolsConfig: ...

    def begin(
        self,
        name: str,
        args: Any,
        *,
        scope: Scope | None = None,
        signal: AbortSignal | None = None,
        call_id: str | None = None,
    ) -> Invocation: ...


def is_concurrency_safe(registry: ToolResolver, request: ToolCallRequest, scope: Scope) -> bool:
    """True only when the tool's ``concurrency_safe`` says exactly True for valid arguments."""
    definition = registry.get(request.name, scope)
    if definition is None:
        return False
    verdict = definition.concurrency_safe
    if callable(verdict):
        if definition.validate_args and validate(definition.parameters, request.args) is not None:
            return False
        try:
            verdict = verdict(request.args)
        except Exception:  # logged as observers are; the call then runs alone
            _log.exception("concurrency_safe of %r failed", definition.name)
            return False
        if inspect.iscoroutine(verdict):
            verdict.close()
            _log.warning("concurrency_safe of %r must be synchronous", definition.name)
            return False
    return verdict is True


async def run_tool_calls(
    registry: BatchHost,
    calls: Sequence[ToolCallRequest],
    *,
    scope: Scope | None = None,
    signal: AbortSignal | None = None,
    max_parallel: int | None = None,
) -> list[ToolResult]:
    """Run the calls of one model step and return their results in model order.

    Consecutive concurrency-safe calls overlap in a rolling pool of ``max_parallel``
    (default ``config.max_parallel_tool_calls``); other calls are barriers. Policy stages,
    results and contexts keep model order; only dispatch overlaps.
    """
    scope = scope or registry.root
    limit = max_parallel or registry.config.max_parallel_tool_calls
    if limit < 1:
        raise ValueError("max_parallel must be at least 1")
    parallel = [is_concurrency_safe(registry, call, scope) for call in calls]
    results: list[ToolResult] = []
    index = 0
    while index < len(calls):
        end = index + 1
        if parallel[index]:
            while end < len(calls) and parallel[end]:
                end += 1
            results.extend(await _run_group(registry, calls[index:end], scope, signal, limit))
        else:
            call = calls[index]
            invocation = registry.begin(
                call.name, call.args, scope=scope, signal=signal, call_id=call.call_id
            )
            await invocation.prepare()  # the stages of ``invoke``, one call alone
            await invocation.dispatch()
            results.append(await invocation.finish())
        index = end
    return results


async def _run_group(
    registry: BatchHost,
    calls: Sequence[ToolCallRequest],
    scope: Scope,
    signal: AbortSignal | None,
    limit: int,
) -> list[ToolResult]:
    pool = anyio.Semaphore(limit)
    dispatched = [anyio.Event() for _ in calls]
    invocations: list[Invocation] = []
    results: list[ToolResult] = []

    async def dispatch(position: int) -> None:
        try:
            await invocations[position].dispatch()
        finally:
            pool.release()
            dispatched[position].set()

    async def finish_in_order() -> None:
        for position in range(len(calls)):
            await dispatched[position].wait()
            results.append(await invocations[position].finish())

    async with anyio.create_task_group() as group:
        group.start_soon(finish_in_order)
        for position, call in enumerate(calls):
            invocation = registry.begin(
                call.name, call.args, scope=scope, signal=signal, call_id=call.call_id
            )
            invocations.append(invocation)
            await invocation.prepare()
            if invocation.pending:
                await pool.acquire()
                group.start_soon(dispatch, position)
            else:
                dispatched[position].set()
    return results
