"""One invocation through the pipeline, as small named stages shared by ``invoke`` and batches."""

from __future__ import annotations

import dataclasses
import inspect
import logging
import threading
from collections.abc import Sequence
from typing import Any, Protocol

import anyio

from host.telemetry import note_asked
from runtime.lowlevel import builtin_exception_name

from ._call import (
    Allow,
    Ask,
    Decision,
    Deny,
    NextFn,
    Pause,
    PostDecision,
    ToolCall,
    ToolResultEvent,
)
from ._definition import ToolDefinition, ToolRunContext, default_render
from ._exceptions import ToolError
from ._hooks import Events, Hooks
from ._json import FrozenDict, freeze
from ._result import ErrorCode, ToolResult, WithContent, normalize_content, user_context
from ._schema import MISSING, Json
from ._scope import Scope
from ._signal import AbortSignal, RunSettled, fuse_signals
from ._validate import validate

__all__ = ("Invocation", "ToolResolver")

_JSON = Json()
_log = logging.getLogger("host.tools")


#: How long a sync tool's thread is waited for once its signal fires (it may be checking
#: ``ctx.signal`` and about to return); past it the thread is abandoned.
SYNC_ABORT_GRACE_S = 1.0


class _Abandoned(Exception):
    """A sync tool's thread did not return within the grace after its signal fired."""


async def _run_in_thread(execute: Any, args: Any, ctx: ToolRunContext) -> Any:
    """A sync tool in a worker thread. When its signal fires, the thread has a grace to see it
    and return (its result or error stands); past the grace, or at once when the awaiting task
    itself is cancelled or the abort says its run settled (``RunSettled``), the thread is
    abandoned and reported: nothing can stop a thread, and a run must not wait for one."""
    finished = threading.Event()

    def body() -> Any:
        try:
            return execute(args, ctx)
        finally:
            finished.set()

    with anyio.CancelScope() as grace:

        def start_grace(reason: object) -> None:
            wait = 0.0 if isinstance(reason, RunSettled) else SYNC_ABORT_GRACE_S
            grace.deadline = min(grace.deadline, anyio.current_time() + wait)

        remove_callback = ctx.signal.add_callback(start_grace)
        try:
            return await anyio.to_thread.run_sync(body, abandon_on_cancel=True)
        finally:
            remove_callback()
            if not finished.is_set():
                _log.warning(
                    "dsh-code: the sync tool %r did not return when its call was aborted; its "
                    "thread is abandoned (it runs on until it returns; its result is dropped)",
                    ctx.name,
                )
    raise _Abandoned  # the grace ran out (the scope caught its own cancellation)


class ToolResolver(Protocol):
    """What an invocation needs from its registry: a tool name resolved in a scope."""

    def get(self, name: str, scope: Scope | None = None) -> ToolDefinition | None: ...


def _error_text(exc: BaseException) -> str:
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _no_callback() -> None:
    return None


async def _maybe_await(value: Any) -> Any:
    return await value if inspect.isawaitable(value) else value


class Invocation:
    """The state of one call as it passes the stages (private to the package)."""

    __slots__ = ("_contexts", "_events", "_hooks", "_post", "_runs", "call", "result")

    def __init__(
        self,
        tools: ToolResolver,
        hooks: Hooks,
        events: Events,
        *,
        name: str,
        args: Any,
        scope: Scope,
        signal: AbortSignal,
        call_id: str | None,
        approved: bool = False,
    ) -> None:
        self._hooks = hooks
        self._events = events
        definition = tools.get(name, scope) if isinstance(name, str) else None
        self.call = ToolCall(name, freeze(args), call_id, scope, signal, definition, approved)
        self.result: ToolResult | None = None
        self._contexts: list[FrozenDict] = []
        self._runs: list[ToolRunContext] = []
        self._post = True
        if definition is None:
            self._refuse(ErrorCode.UNKNOWN_TOOL, f"unknown tool {name!r}")
        elif signal.is_set():
            self._refuse(ErrorCode.ABORTED_BEFORE_DISPATCH, _aborted_message(signal))

    def _refuse(self, code: ErrorCode, message: str) -> None:
        """Settle the call before any stage runs (unknown tool, or aborted at once): no post."""
        self.result = ToolResult.failure(code, message)
        self._post = False

    @property
    def pending(self) -> bool:
        """True while the call still has to be dispatched."""
        return self.result is None

    # -- before dispatch -------------------------------------------------------------------

    async def prepare(self) -> None:
        """Validate arguments, run the pre-execute waterfall, then the guards."""
        if self.result is not None:
            return
        self.result = (
            self._validate_args()
            or await self._pre_execute()
            or self._guard()
            or self._check_abort()
        )

    def _validate_args(self) -> ToolResult | None:
        definition = self.call.definition
        assert definition is not None
        if not definition.validate_args:
            return None
        error = validate(definition.parameters, self.call.args)
        if error is None:
            return None
        return ToolResult.failure(
            ErrorCode.INVALID_ARGS, f"invalid arguments for {self.call.name}: {error}"
        )

    async def _pre_execute(self) -> ToolResult | None:
        hooks = self._hooks.pre_execute.snapshot()
        if not hooks:  # the decision stays Allow: nothing to ask, nothing to deny
            return None
        decision: Decision = Allow()
        try:
            for hook in hooks:
                new = await _maybe_await(hook(self.call, decision))
                if new is not None:
                    if not isinstance(new, Allow | Deny | Ask | Pause):
                        raise TypeError(f"pre-execute hook returned {new!r}")
                    decision = new
            if isinstance(decision, Ask | Pause) and self.call.approved:
                decision = Allow()  # a person allowed it when its paused run resumed
            if isinstance(decision, Ask):
                decision = await self._ask(decision)
        except Exception as exc:
            decision = Deny(f"pre-execute policy failed: {_error_text(exc)}")
        if isinstance(decision, Deny):
            return ToolResult.failure(
                ErrorCode.DENIED, f"tool call {self.call.name} denied: {decision.reason}"
            )
        if isinstance(decision, Pause):
            return self._paused(decision)
        return None

    async def _ask(self, ask: Ask) -> Decision:
        handler = self._hooks.ask_handler
        if handler is None:
            return Deny(f"approval needed ({ask.prompt}) but no ask handler is set")
        answer = await _maybe_await(handler(self.call, ask))
        if isinstance(answer, Pause | Deny):
            return answer  # no answer yet: hold the call; or refused, saying why
        if answer is not True:
            return Deny(f"not approved: {ask.prompt}")
        note_asked(self.call.call_id)  # its span says it was allowed once asked
        return Allow()

    def _paused(self, pause: Pause) -> ToolResult:
        return ToolResult.failure(
            ErrorCode.PAUSED,
            f"tool call {self.call.name} paused: {pause.reason}",
            meta={"paused": {"reason": pause.reason}},
        )

    def _guard(self) -> ToolResult | None:
        for guard in self._hooks.guards.snapshot():
            try:
                reason = guard(self.call)
                if inspect.isawaitable(reason):
                    if inspect.iscoroutine(reason):
                        reason.close()
                    reason = "guard must be synchronous"
            except Exception as exc:
                reason = f"guard failed: {_error_text(exc)}"
            if isinstance(reason, Pause):
                if self.call.approved:
                    continue  # a person allowed it when its paused run resumed
                return self._paused(reason)
            if reason is not None:
                return ToolResult.failure(ErrorCode.GUARD_REJECTED, str(reason))
        return None

    def _check_abort(self) -> ToolResult | None:
        if self.call.signal.is_set():
            return ToolResult.failure(
                ErrorCode.ABORTED_BEFORE_DISPATCH, _aborted_message(self.call.signal)
            )
        return None

    # -- dispatch --------------------------------------------------------------------------

    async def dispatch(self) -> None:
        """Run the execute wrappers around the body (dispatch + normalize)."""
        if self.result is not None:
            return
        definition = self.call.definition
        assert definition is not None
        wrappers = self._hooks.wrappers.snapshot(timed=definition.timeout_ms is not None)

        def layer(index: int, call: ToolCall) -> NextFn:
            async def next_(signal: AbortSignal | None = None) -> ToolResult:
                inner = call if signal is None else dataclasses.replace(call, signal=signal)
                if index == len(wrappers):
                    return await self._body(inner.signal)
                result = await wrappers[index](inner, layer(index + 1, inner))
                if not isinstance(result, ToolResult):
                    raise TypeError(f"execute wrapper returned {type(result).__name__}")
                return result

            return next_

        if not wrappers:  # what the innermost layer would run, without building the chain
            result = await self._body(self.call.signal)
        else:
            try:  # the body never raises: whatever escapes here is a wrapper's
                result = await layer(0, self.call)()
            except Exception as exc:
                result = ToolResult.failure(
                    ErrorCode.TOOL_ERROR,
                    f"execute wrapper failed: {_error_text(exc)}",
                    name="ToolWrapperError",
                )
        if self.call.signal.is_set() and not result.is_error:
            result = ToolResult.failure(ErrorCode.ABORTED, _aborted_message(self.call.signal))
        self.result = result

    async def _body(self, layer_signal: AbortSignal) -> ToolResult:
        """The registry's thunk: re-fuse the caller's signal, run the body, normalize.

        It never raises: a fault in our own steps is logged and fails the call as the
        pipeline's, so no wrapper and no tool is blamed for it.
        """
        try:
            return await self._run_body(layer_signal)
        except Exception as exc:
            _log.exception("the tool pipeline failed on a call of %r", self.call.name)
            return ToolResult.failure(
                ErrorCode.TOOL_ERROR,
                f"internal error in the tool pipeline: {_error_text(exc)}",
                name="ToolPipelineError",
            )

    async def _run_body(self, layer_signal: AbortSignal) -> ToolResult:
        definition = self.call.definition
        assert definition is not None
        signal, dispose = fuse_signals(self.call.signal, layer_signal)
        try:
            if signal.is_set():
                return ToolResult.failure(
                    ErrorCode.ABORTED_BEFORE_DISPATCH, _aborted_message(signal)
                )
            ctx = ToolRunContext(
                name=self.call.name,
                call_id=self.call.call_id,
                scope=self.call.scope,
                signal=signal,
                args=self.call.args,
            )
            self._runs.append(ctx)
            with anyio.CancelScope() as cancellation:
                # An async body is cancelled at its await when the signal fires; a sync one
                # is given a grace to notice it (see _run_in_thread).
                remove_callback = (
                    signal.add_callback(lambda _reason: cancellation.cancel())
                    if definition.is_async
                    else _no_callback
                )
                try:
                    if definition.is_async:
                        value = await definition.execute(self.call.args, ctx)
                    else:
                        value = await _run_in_thread(definition.execute, self.call.args, ctx)
                        value = await _maybe_await(value)
                except ToolError as exc:
                    return _tool_error_result(exc)
                except _Abandoned:
                    return ToolResult.failure(ErrorCode.ABORTED, _aborted_message(signal))
                except Exception as exc:  # named as its builtin type: code mode raises it so
                    return ToolResult.failure(
                        ErrorCode.TOOL_ERROR, _error_text(exc), name=builtin_exception_name(exc)
                    )
                finally:
                    remove_callback()
            if cancellation.cancelled_caught:
                return ToolResult.failure(ErrorCode.ABORTED, _aborted_message(signal))
            return self._normalize(definition, value)
        finally:
            dispose()

    def _normalize(self, definition: ToolDefinition, value: Any) -> ToolResult:
        extra: Sequence[Any] = ()
        if isinstance(value, WithContent):
            value, extra = value.value, value.parts
        error = validate(definition.output_schema, value)
        if error is not None:
            return ToolResult.failure(
                ErrorCode.OUTPUT_INVALID, f"{definition.name} returned an invalid value: {error}"
            )
        value = freeze(value)
        output = definition.output
        try:
            render = default_render if output is None else output.render
            content = render(self.call.args, value)
            meta = None
            if output is not None and output.presentation_meta is not None:
                presentation = output.presentation_meta(self.call.args, value)
                problem = validate(_JSON, presentation)
                if problem is not None:
                    raise TypeError(f"presentation_meta is not JSON: {problem}")
                meta = {"presentation": presentation}
            if extra:
                content = [*normalize_content(content), *normalize_content(list(extra))]
            return ToolResult.success(value, content, meta=meta)
        except Exception as exc:
            return ToolResult.failure(
                ErrorCode.TOOL_ERROR, f"rendering the result failed: {_error_text(exc)}"
            )

    # -- after dispatch --------------------------------------------------------------------

    async def finish(self) -> ToolResult:
        """Run post-execute, finalize_content, attach contexts, publish ``result``."""
        assert self.result is not None
        result = self.result
        if self._post:
            result = await self._post_execute(result)
        result = self._finalize(result)
        contexts = [c for run in self._runs for c in run._deferred] + self._contexts
        if contexts:
            result = result.replace(additional_contexts=[*result.additional_contexts, *contexts])
        self.result = result
        events = self._events
        if events.observed("result"):
            events.emit("result", ToolResultEvent(self.call, result))
        return result

    async def _post_execute(self, result: ToolResult) -> ToolResult:
        for hook in self._hooks.post_execute.snapshot():
            try:
                decision = hook(self.call, result)
                if decision is not None and inspect.isawaitable(decision):
                    decision = await decision
                if decision is None:
                    continue
                if not isinstance(decision, PostDecision):
                    raise TypeError(f"post-execute hook returned {decision!r}")
                result = self._apply(result, decision)
            except Exception as exc:
                return ToolResult.failure(
                    ErrorCode.TOOL_ERROR,
                    f"post-execute policy failed: {_error_text(exc)}",
                    name="ToolPostExecuteError",
                )
        return result

    def _apply(self, result: ToolResult, decision: PostDecision) -> ToolResult:
        self._contexts.extend(user_context(c) for c in decision.additional_contexts)
        if decision.block is not None:
            return ToolResult.failure(
                ErrorCode.DENIED, f"result blocked: {decision.block}", name="ToolBlockedError"
            )
        definition = self.call.definition
        assert definition is not None
        if decision.value is not MISSING and not result.is_error:
            error = validate(definition.output_schema, decision.value)
            if error is not None:
                return ToolResult.failure(
                    ErrorCode.OUTPUT_INVALID, f"post-execute replaced an invalid value: {error}"
                )
            value = freeze(decision.value)
            render = default_render if definition.output is None else definition.output.render
            content = decision.content
            if content is MISSING:
                content = render(self.call.args, value)
            result = result.replace(value=value, content=content)
        elif decision.content is not MISSING:
            result = result.replace(content=decision.content)
        return result

    def _finalize(self, result: ToolResult) -> ToolResult:
        definition = self.call.definition
        if definition is None or definition.finalize_content is None:
            return result
        try:
            content = definition.finalize_content(result)
            if inspect.isawaitable(content):
                if inspect.iscoroutine(content):
                    content.close()
                raise TypeError("finalize_content must be synchronous")
            return result if content is None else result.replace(content=content)
        except Exception as exc:
            return ToolResult.failure(
                ErrorCode.TOOL_ERROR,
                f"finalize_content failed: {_error_text(exc)}",
                meta=None if result.meta is None else dict(result.meta),
            )


def _tool_error_result(exc: ToolError) -> ToolResult:
    """A body's ``ToolError`` as its failure; a malformed one is still the tool's failure."""
    try:
        code = ErrorCode(exc.code)
    except ValueError:
        return ToolResult.failure(
            ErrorCode.TOOL_ERROR,
            f"{exc.message} (the tool raised ToolError with the unknown code {exc.code!r})",
        )
    try:
        return ToolResult.failure(
            code, exc.message, name=exc.name, content=exc.content, meta=exc.meta
        )
    except Exception as bad:  # its content or meta is not what a result can carry
        return ToolResult.failure(
            ErrorCode.TOOL_ERROR, f"the tool raised a malformed ToolError: {_error_text(bad)}"
        )


def _aborted_message(signal: AbortSignal) -> str:
    reason = signal.reason
    return "tool call was aborted" + ("" if reason in (None, "aborted") else f": {reason}")
