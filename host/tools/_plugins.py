"""The guard plugins: the timeout policy and the repeat-tool reminder."""

from __future__ import annotations

import contextlib
import fnmatch
import functools
import weakref
from typing import Final, Protocol

import anyio

from ._call import NextFn, Observer, PostDecision, PostExecuteHook, ToolCall
from ._config import Disposer, RepeatReminderConfig
from ._json import canonical_json
from ._result import ErrorCode, ToolResult, user_context
from ._scope import Scope
from ._signal import AbortController, fuse_signals

__all__ = ("PluginHost", "RepeatToolReminder", "timeout_policy")


class PluginHost(Protocol):
    """What a plugin needs from a registry: adding a post-execute hook, observing an event."""

    def post_execute(self, hook: PostExecuteHook, *, order: int = 0) -> Disposer: ...

    def on(self, event: str, callback: Observer) -> Disposer: ...


class _TimedOut:
    """The abort reason the timeout policy's own timer uses."""

    __slots__ = ("ms",)

    def __init__(self, ms: int) -> None:
        self.ms = ms

    def __repr__(self) -> str:
        return f"TOOL_TIMEOUT({self.ms}ms)"


async def timeout_policy(call: ToolCall, next_: NextFn) -> ToolResult:
    """An execute wrapper enforcing the tool's own ``timeout_ms`` as a cooperative deadline."""
    definition = call.definition
    timeout_ms = None if definition is None else definition.timeout_ms
    if timeout_ms is None:
        return await next_()
    timer = AbortController()
    fired = False

    async def run_timer() -> None:
        nonlocal fired
        await anyio.sleep(timeout_ms / 1000)
        fired = True
        timer.abort(_TimedOut(timeout_ms))

    deadline, dispose = fuse_signals(call.signal, timer.signal)
    try:
        async with anyio.create_task_group() as group:
            group.start_soon(run_timer)
            try:
                result = await next_(deadline)
            finally:
                group.cancel_scope.cancel()
    finally:
        dispose()
    if fired:
        return ToolResult.failure(
            ErrorCode.TOOL_TIMEOUT, f"tool call timed out after {timeout_ms}ms"
        )
    return result


@functools.lru_cache(maxsize=1024)
def _tracks(name: str, include: tuple[str, ...], exclude: tuple[str, ...]) -> bool:
    """The reminder's name filter; pure, so cached (each call runs up to two pattern scans)."""
    if include and not any(fnmatch.fnmatchcase(name, p) for p in include):
        return False
    return not any(fnmatch.fnmatchcase(name, p) for p in exclude)


SOURCE: Final = {"kind": "plugin", "plugin": "repeat-tool-reminder"}


class _Chain:
    __slots__ = ("count", "key")

    def __init__(self) -> None:
        self.key: tuple[str, str] | None = None
        self.count = 0


class RepeatToolReminder:
    """Counts identical consecutive calls per agent and attaches escalating reminders."""

    def __init__(self, config: RepeatReminderConfig | None = None) -> None:
        self.config = config or RepeatReminderConfig()
        self._chains: weakref.WeakKeyDictionary[Scope, _Chain] = weakref.WeakKeyDictionary()

    def install(self, registry: PluginHost) -> Disposer:
        """Attach to ``registry`` (post-execute and ``agent/pre-step``); return a disposer."""
        disposers = [
            registry.post_execute(self.on_post_execute, order=1000),
            registry.on("agent/pre-step", self.reset),
        ]

        def dispose() -> None:
            for disposer in disposers:
                disposer()

        return dispose

    def tracks(self, name: str) -> bool:
        """True when calls to ``name`` take part in the chain."""
        include, exclude = self.config.include, self.config.exclude
        try:
            return _tracks(name, include, exclude)
        except TypeError:  # unhashable pattern lists: match without the cache
            return _tracks.__wrapped__(name, include, exclude)

    def reset(self, scope: Scope) -> None:
        """Forget the chain of an agent scope (a user prompt arrived)."""
        with contextlib.suppress(TypeError):
            self._chains.pop(scope, None)

    def count(self, scope: Scope) -> int:
        """The current consecutive count of the agent's chain."""
        chain = self._chains.get(scope)
        return 0 if chain is None else chain.count

    def on_post_execute(self, call: ToolCall, _result: ToolResult) -> PostDecision | None:
        """Advance the chain of the call's agent and maybe attach a reminder."""
        if not self.tracks(call.name):
            return None
        normalized = canonical_json(call.args)
        key = (call.name, normalized)
        chain = self._chains.setdefault(call.scope, _Chain())
        if chain.key == key:
            chain.count += 1
        else:
            chain.key, chain.count = key, 1
        thresholds = self.config.thresholds
        if chain.count not in thresholds:
            return None
        if chain.count == min(thresholds):
            text = self._short(call.name, chain.count)
        else:
            text = self._detailed(call.name, chain.count, normalized)
        return PostDecision(additional_contexts=(user_context(text, source=SOURCE),))

    @staticmethod
    def _short(name: str, count: int) -> str:
        return (
            f"Reminder: you have called {name} {count} times in a row with the same arguments. "
            "Re-read the last result instead of repeating the call."
        )

    def _detailed(self, name: str, count: int, normalized: str) -> str:
        limit = self.config.arguments_preview_chars
        preview = normalized
        if len(normalized) > limit:
            preview = normalized[:limit] + f"…[{len(normalized) - limit} more chars]"
        return (
            f"Reminder: {name} has now been called {count} consecutive times with identical "
            f"arguments {preview}. Repeating it will not change the result. Re-read the last "
            "result, then change your approach or wrap up."
        )
