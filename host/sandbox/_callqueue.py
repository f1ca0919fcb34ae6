"""The queue between a run's bridge and its call workers: arrival order, no checkpoints."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

import anyio
import msgspec

from runtime import Binding

__all__ = ("CallQueue", "QueuedCall")


@dataclass(frozen=True, slots=True)
class QueuedCall:
    """A binding call waiting for a worker."""

    id: int
    name: str
    binding: Binding
    args: msgspec.Raw


class CallQueue:
    """Binding calls waiting for a worker, served in arrival order.

    Unlike a memory object stream, taking a call does not first yield to the event loop:
    on the host a binding call's own work is a few loop iterations, and that checkpoint
    was one of them, on every call.
    """

    def __init__(self) -> None:
        self._calls: deque[QueuedCall] = deque()
        self._idle: deque[anyio.Event] = deque()  # one per worker waiting for a call
        self._closed = False

    def __len__(self) -> int:
        """Calls waiting for a worker."""
        return len(self._calls)

    @property
    def idle_workers(self) -> int:
        """Workers waiting for a call right now."""
        return len(self._idle)

    def put(self, call: QueuedCall) -> None:
        """Queue a call and wake one idle worker (if any) to take it."""
        self._calls.append(call)
        if self._idle:
            self._idle.popleft().set()

    async def get(self) -> QueuedCall | None:
        """The next call, waiting for one if need be; None once the queue is closed."""
        while not self._calls:
            if self._closed:
                return None
            woken = anyio.Event()
            self._idle.append(woken)
            try:
                await woken.wait()
            finally:
                if woken in self._idle:  # cancelled while idle
                    self._idle.remove(woken)
        return self._calls.popleft()

    def close(self) -> None:
        """No more calls: idle workers wake and get None (queued calls are still served)."""
        self._closed = True
        while self._idle:
            self._idle.popleft().set()
