"""A run's log intake: bytes from the child's log pipe into lines, bounded as they arrive.

Work is linear in the bytes (a line is split once, when its newline arrives), the text kept
never passes ``max_output_bytes``, and the lines kept never pass ``max_lines`` (each one is
a Python object on the host: a flood of empty lines would cost the host ~50 times its bytes).
"""

from __future__ import annotations

import logging
from collections.abc import Callable

__all__ = ("LogIntake",)

_log = logging.getLogger("host.sandbox")


class LogIntake:
    """Lines of a run's logs, in order; ``over`` once the output cap or line cap is passed."""

    def __init__(
        self, max_bytes: int, max_lines: int, on_log: Callable[[str], None] | None
    ) -> None:
        self.max_bytes = max_bytes
        self.max_lines = max_lines
        self.lines: list[str] = []
        self.bytes = 0
        self.over: str | None = None  # why the cap was passed, once it was
        self._on_log = on_log
        self._partial = bytearray()
        self._lines_over = False

    def feed(self, data: bytes) -> None:
        """Take ``data`` (as much of it as the caps allow)."""
        if self.over is not None or not data:
            return
        room = self.max_bytes - self.bytes
        if len(data) > room:
            data = data[: max(room, 0)]
            self.over = (
                f"the logs passed max_output_bytes ({self.max_bytes}); they are kept up to the cap"
            )
        self.bytes += len(data)
        start = 0
        while True:
            end = data.find(b"\n", start)
            if end < 0:
                self._partial += data[start:]
                break
            if self._partial:
                self._partial += data[start:end]
                line = bytes(self._partial)
                self._partial.clear()
            else:
                line = data[start:end]
            start = end + 1
            if not self._add(line):
                return

    def _add(self, line: bytes) -> bool:
        if len(self.lines) >= self.max_lines:
            self._lines_over = True
            self.over = (
                f"the logs passed {self.max_lines} lines (each line costs the host memory "
                "beyond its bytes); they are kept up to that"
            )
            self._partial.clear()
            return False
        text = line.decode("utf-8", "replace")
        self.lines.append(text)
        if self._on_log is not None:
            try:
                self._on_log(text)
            except Exception:
                _log.exception("dsh-code: an on_log callback raised (the run goes on)")
        return True

    def close(self) -> None:
        """The end of the logs: an unfinished last line counts as a line (cut at the output
        cap when the cap cut it: its bytes up to the cap are kept, as every line's are)."""
        if self._partial and not self._lines_over:
            line = bytes(self._partial)
            self._partial.clear()
            self._add(line)
        self._partial.clear()
