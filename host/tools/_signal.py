"""Cooperative cancellation: a read-only ``AbortSignal`` and its ``AbortController``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import anyio

__all__ = ("AbortController", "AbortSignal", "RunSettled", "fuse_signals")


class RunSettled(str):
    """An abort reason saying nothing waits for the call any more (the run that made it has
    settled): a sync tool's thread is abandoned at once, without the grace a plain abort
    gives it to notice ``ctx.signal``."""


class AbortSignal:
    """A read-only cancellation signal: ``is_set()``, ``await wait()``, ``reason``.

    Works under asyncio and trio; ``is_set()`` may be read from worker threads.
    """

    __slots__ = ("_callbacks", "_fired", "_reason", "_waiters")

    def __init__(self) -> None:
        self._fired = False
        self._reason: object = None
        self._waiters: list[anyio.Event] = []
        self._callbacks: list[Callable[[Any], None]] = []

    def __repr__(self) -> str:
        state = f"aborted reason={self._reason!r}" if self._fired else "pending"
        return f"<AbortSignal {state}>"

    def is_set(self) -> bool:
        """Return True once the signal has fired."""
        return self._fired

    @property
    def reason(self) -> Any:
        """The reason given to ``abort``, or None while pending."""
        return self._reason

    async def wait(self) -> None:
        """Wait until the signal fires (returns at once if it already has)."""
        if self._fired:
            return
        event = anyio.Event()
        self._waiters.append(event)
        try:
            await event.wait()
        finally:
            if event in self._waiters:
                self._waiters.remove(event)

    def add_callback(self, callback: Callable[[Any], None]) -> Callable[[], None]:
        """Call ``callback(reason)`` when the signal fires (now if it has); return a disposer."""
        if self._fired:
            callback(self._reason)
            return _noop
        self._callbacks.append(callback)

        def dispose() -> None:
            if callback in self._callbacks:
                self._callbacks.remove(callback)

        return dispose

    def _fire(self, reason: object) -> None:
        if self._fired:
            return
        self._fired = True
        self._reason = reason
        waiters, self._waiters = self._waiters, []
        callbacks, self._callbacks = self._callbacks, []
        for event in waiters:
            event.set()
        for callback in callbacks:
            callback(reason)


def _noop() -> None:
    return None


class AbortController:
    """The owner of an ``AbortSignal``: ``abort(reason)`` fires ``.signal`` once."""

    __slots__ = ("signal",)

    def __init__(self) -> None:
        self.signal = AbortSignal()

    def __repr__(self) -> str:
        return f"<AbortController {self.signal!r}>"

    def abort(self, reason: object = "aborted") -> None:
        """Fire the signal with ``reason`` (later calls do nothing); call it on the event loop."""
        self.signal._fire(reason)


def fuse_signals(*signals: AbortSignal | None) -> tuple[AbortSignal, Callable[[], None]]:
    """Return a signal that fires when any of ``signals`` fires, and a disposer for the links."""
    present = [signal for signal in signals if signal is not None]
    if len(present) == 1:
        return present[0], _noop
    controller = AbortController()
    disposers = [signal.add_callback(controller.abort) for signal in present]

    def dispose() -> None:
        for disposer in disposers:
            disposer()

    return controller.signal, dispose
