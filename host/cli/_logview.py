"""A run's logs at a terminal, past a screenful: the head shown as it is written, the tail at
the end, one line between them saying what was left out (as a model reads a long run).

The head takes half the screen's rows; later lines are held, the last ones that fit the
other half kept, and shown when the run ends, after the line standing for those dropped.
A line is as many rows as the terminal wraps it to; one longer than the whole tail shows
its end. ``--full-logs`` (or a pipe) shows every line instead.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable

from host.codemode import left_out_line

__all__ = ("TerminalLogView",)

#: Rows kept free below the tail: the line between, the result, the shell's prompt.
_SPARE_ROWS = 4


class TerminalLogView:
    """Log lines for a screen of ``rows`` x ``columns``: a live head, a tail held to the end."""

    def __init__(
        self, show: Callable[[str], None], rows: int, columns: int, where: str | None = None
    ) -> None:
        self._show = show
        self._columns = max(columns, 1)
        self._head_rows = max(rows // 2, 1)
        self._tail_rows = max(rows - self._head_rows - _SPARE_ROWS, 1)
        self._where = where
        self._head_used = 0
        self._holding = False
        self._tail: deque[str] = deque()
        self._tail_used = 0
        self.lines_left_out = 0
        self.bytes_left_out = 0

    @property
    def held(self) -> int:
        """Lines written but not shown yet (or dropped): what the status line counts."""
        return len(self._tail) + self.lines_left_out

    def _rows(self, text: str) -> int:
        return max(-(-len(text) // self._columns), 1)

    def line(self, text: str) -> None:
        """One log line: shown now while the head has room, else held for the tail."""
        rows = self._rows(text)
        if not self._holding and self._head_used + rows <= self._head_rows:
            self._head_used += rows
            self._show(text)
            return
        self._holding = True
        self._tail.append(text)
        self._tail_used += rows
        while self._tail_used > self._tail_rows and len(self._tail) > 1:
            dropped = self._tail.popleft()
            self._tail_used -= self._rows(dropped)
            self.lines_left_out += 1
            self.bytes_left_out += len(dropped.encode()) + 1

    def finish(self) -> None:
        """The run ended: the line standing for what was dropped, then the tail."""
        tail = list(self._tail)
        self._tail.clear()
        room = self._tail_rows * self._columns
        if tail and len(tail[0]) > room:  # one line longer than the tail: its end
            cut, tail[0] = tail[0][:-room], tail[0][-room:]
            self.lines_left_out += 1
            self.bytes_left_out += len(cut.encode())
        if self.lines_left_out:
            self._show(
                left_out_line(
                    self.lines_left_out,
                    self.bytes_left_out,
                    ("logs",),
                    self._where,
                    otherwise="--full-logs shows every line",
                )
            )
        for text in tail:
            self._show(text)
