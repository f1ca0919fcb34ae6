"""A run's log intake: bytes from the child's log pipe into lines, bounded as they arrive.

Work is linear in the bytes and bounded per chunk: a line is split once, when its newline
arrives, and the bytes of a line still open are decoded as they arrive, so no one step
decodes a whole long line (a 64 MiB line decoded at its end held the event loop ~80 ms).
The text kept never passes ``max_output_bytes``, and the lines kept never pass ``max_lines``
(each one is a Python object on the host: a flood of empty lines would cost the host ~50
times its bytes).
"""

from __future__ import annotations

import codecs
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
        self._open = False  # whether a line's newline is still to come
        self._open_text = ""  # that line so far, decoded
        self._decoder = codecs.getincrementaldecoder("utf-8")("replace")
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
                if start < len(data):
                    self._extend(self._decoder.decode(data[start:]))
                break
            if self._open:
                text = self._end_open(data[start:end])
            else:
                text = data[start:end].decode("utf-8", "replace")
            start = end + 1
            if not self._add(text):
                return

    def _extend(self, piece: str) -> None:
        # `text += piece` on a local that holds the only reference grows the string in place
        # (CPython reallocates it): O(piece) per chunk, where one join at the line's end
        # would touch all of a 64 MiB line's fresh pages in one step (~30 ms here).
        text, self._open_text = self._open_text, ""
        text += piece
        self._open_text = text
        self._open = True

    def _end_open(self, rest: bytes) -> str:
        """The open line, ended by ``rest``."""
        self._extend(self._decoder.decode(rest, final=True))
        text, self._open_text, self._open = self._open_text, "", False
        self._decoder.reset()
        return text

    def _add(self, text: str) -> bool:
        if len(self.lines) >= self.max_lines:
            self._lines_over = True
            self.over = (
                f"the logs passed {self.max_lines} lines (each line costs the host memory "
                "beyond its bytes); they are kept up to that"
            )
            self._open, self._open_text = False, ""
            return False
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
        if self._open and not self._lines_over:
            self._add(self._end_open(b""))
        self._open, self._open_text = False, ""
