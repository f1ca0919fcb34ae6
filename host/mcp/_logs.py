"""A program's log lines as MCP log notifications: batched, bounded, never blocking the run.

``push`` is O(1) and never waits (it runs in the runtime's log intake). Lines that arrive
while a notification is being sent are joined into the next one (``data`` is one or more
lines joined by ``\\n``), so a flood costs one notification per batch, not per line. At
most ``max_pending_chars`` wait to be sent; past that, lines are dropped and counted, and
the next notification says how many (the run's result still has every line, up to the
output cap). A client that fails a send gets no further notifications for this run.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Awaitable, Callable
from typing import Final

import anyio

__all__ = ("LogForwarder",)

_TRUNCATED: Final = "… ({} more characters)"


class LogForwarder:
    """Queue lines with ``push``; ``run`` sends them in batches until ``close`` and drained."""

    def __init__(
        self,
        send: Callable[[str], Awaitable[None]],
        *,
        max_pending_chars: int = 1 << 20,
        max_batch_chars: int = 64 * 1024,
    ) -> None:
        self._send = send
        self.max_pending_chars = max_pending_chars
        self.max_batch_chars = max_batch_chars
        self._lines: deque[str] = deque()
        self._pending = 0
        self._dropped = 0
        self._closed = False
        self._broken = False
        self._wake = anyio.Event()
        self.sent = 0
        """Notifications sent so far."""
        self.dropped_total = 0
        """Lines dropped because the client read slower than the program wrote."""

    def push(self, line: str) -> None:
        """Queue one line (dropped and counted past the bound); never blocks."""
        if self._broken or self._closed:
            return
        if len(line) > self.max_batch_chars:
            cut = len(line) - self.max_batch_chars
            line = line[: self.max_batch_chars] + _TRUNCATED.format(cut)
        size = len(line) + 1
        if self._pending + size > self.max_pending_chars:
            self._dropped += 1
            self.dropped_total += 1
        else:
            self._lines.append(line)
            self._pending += size
        self._wake.set()

    def close(self) -> None:
        """No more lines: ``run`` returns once the queued ones are sent."""
        self._closed = True
        self._wake.set()

    def _batch(self) -> str:
        parts: list[str] = []
        size = 0
        while self._lines and (not parts or size + len(self._lines[0]) + 1 <= self.max_batch_chars):
            line = self._lines.popleft()
            parts.append(line)
            size += len(line) + 1
        self._pending -= size
        if self._dropped and not self._lines:
            parts.append(
                f"[dsh-code: {self._dropped} log lines not forwarded: the client read slower "
                "than the program wrote; the run's result has them]"
            )
            self._dropped = 0
        return "\n".join(parts)

    async def run(self) -> None:
        """Send batches until closed and drained (or the client fails a send)."""
        while True:
            await self._wake.wait()
            self._wake = anyio.Event()
            while (self._lines or self._dropped) and not self._broken:
                text = self._batch()
                try:
                    await self._send(text)
                    self.sent += 1
                except Exception:  # a client that went away must not fail the run
                    self._broken = True
                    self._lines.clear()
            if self._closed or self._broken:
                return
