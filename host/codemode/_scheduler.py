"""The sub-call scheduler: concurrency-safe calls overlap, exclusive calls are barriers."""

from __future__ import annotations

from collections import deque
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio

__all__ = ("SubCallScheduler",)


class _Ticket:
    __slots__ = ("parallel", "ready")

    def __init__(self, parallel: bool) -> None:
        self.parallel = parallel
        self.ready = anyio.Event()


class SubCallScheduler:
    """Admits calls in arrival order: parallel ones up to ``max_parallel`` at once, an
    exclusive one only when nothing else runs, and nothing after it until it is done."""

    def __init__(self, max_parallel: int) -> None:
        if max_parallel < 1:
            raise ValueError("max_parallel must be at least 1")
        self.max_parallel = max_parallel
        self._queue: deque[_Ticket] = deque()
        self._running = 0
        self._exclusive = False
        self.peak = 0

    @asynccontextmanager
    async def slot(self, parallel: bool) -> AsyncIterator[None]:
        """Hold a place for one call; ``parallel`` only when the tool said exactly True."""
        ticket = _Ticket(parallel)
        self._queue.append(ticket)
        self._pump()
        try:
            await ticket.ready.wait()
        except BaseException:
            if ticket.ready.is_set():
                self._release(ticket)
            else:
                self._queue.remove(ticket)
                self._pump()
            raise
        try:
            yield
        finally:
            self._release(ticket)

    def _release(self, ticket: _Ticket) -> None:
        self._running -= 1
        if not ticket.parallel:
            self._exclusive = False
        self._pump()

    def _pump(self) -> None:
        while self._queue and not self._exclusive:
            head = self._queue[0]
            if head.parallel:
                if self._running >= self.max_parallel:
                    return
            elif self._running:
                return
            self._queue.popleft()
            self._running += 1
            self._exclusive = not head.parallel
            self.peak = max(self.peak, self._running)
            head.ready.set()
