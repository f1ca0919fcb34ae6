"""A run's log intake: bytes from the child's log pipe into lines, bounded as they arrive.

Work is linear in the bytes and bounded per chunk: a line is split once, when its newline
arrives, and the bytes of a line still open are decoded as they arrive, so no one step
decodes a whole long line (a 64 MiB line decoded at its end held the event loop ~80 ms).
The text kept never passes ``max_output_bytes`` in bytes as written, nor twice that as the
host holds it decoded (a mostly-ASCII line with one emoji is held at 4 bytes a character;
an invalid byte becomes a 2-byte U+FFFD, the most any other text grows by), and the
lines kept never pass ``max_lines`` (each one is a Python object on the host: a flood of
empty lines would cost the host ~50 times its bytes).
"""

from __future__ import annotations

import codecs
import logging
import sys
from collections.abc import Callable

__all__ = ("LogIntake",)

_log = logging.getLogger("host.sandbox")
#: ``sys.getsizeof`` of a compact non-ASCII str is this plus (length + 1) x its kind (1, 2, 4).
_NON_ASCII_BASE = sys.getsizeof("é") - 2


def _kind(text: str) -> int:
    """Bytes a character of ``text`` takes on the host: 1, 2 or 4 (CPython stores a str by
    its widest character); O(1)."""
    if text.isascii():
        return 1
    return (sys.getsizeof(text) - _NON_ASCII_BASE) // (len(text) + 1)


def held(text: str) -> int:
    """Bytes the host holds for ``text``'s characters."""
    return len(text) * _kind(text)


def _cut(text: str, room: int) -> str:
    """``text``, shortened to hold at most ``room`` bytes on the host."""
    kind = _kind(text)
    return text if len(text) * kind <= room else text[: max(room // kind, 0)]


class LogIntake:
    """Lines of a run's logs, in order; ``over`` once the output cap or line cap is passed."""

    def __init__(
        self, max_bytes: int, max_lines: int, on_log: Callable[[str], None] | None
    ) -> None:
        self.max_bytes = max_bytes
        self.max_lines = max_lines
        self.lines: list[str] = []
        self.bytes = 0
        self.held = 0  # what the kept lines hold on the host (see ``held``): at most twice the cap
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
            if self.over is not None and self._open:
                return  # the open line took the last of the room
            if self._open:
                text = self._end_open(data[start:end])
            else:
                text = data[start:end].decode("utf-8", "replace")
            start = end + 1
            if not self._add(text) or self.over is not None:
                return

    def _extend(self, piece: str) -> None:
        # `text += piece` on a local that holds the only reference grows the string in place
        # (CPython reallocates it): O(piece) per chunk, where one join at the line's end
        # would touch all of a 64 MiB line's fresh pages in one step (~30 ms here).
        text, self._open_text = self._open_text, ""
        text += piece
        room = 2 * self.max_bytes - self.held
        if held(text) > room:  # one wide character made the whole line wide
            text = _cut(text, room)
            self._over_decoded()
        self._open_text = text
        self._open = True

    def _over_decoded(self) -> None:
        if self.over is None:
            self.over = (
                f"the logs passed twice max_output_bytes ({self.max_bytes}) as the host holds "
                "them decoded (a character beyond the Basic Multilingual Plane makes its whole "
                "line 4 bytes a character); they are kept up to that"
            )

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
        room = 2 * self.max_bytes - self.held
        if held(text) > room:
            text = _cut(text, room)
            self._over_decoded()
        self.held += held(text)
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
