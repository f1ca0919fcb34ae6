"""What a model reads of a run: its text, held to a budget by a head and a tail.

``max_output_bytes`` protects the host; ``max_model_output_bytes`` protects the model's
context. A text past the budget keeps its head and its tail, and one line between them says
how much was left out (lines and bytes), which parts the cut went through (a cut result is
said to be cut: what is shown of it is not whole JSON), and where the whole text is.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import msgspec

__all__ = (
    "MIN_MODEL_OUTPUT_BYTES",
    "ModelText",
    "cut_to_budget",
    "failure_text",
    "left_out_line",
    "success_text",
)

#: The smallest budget: a head and a tail of some use, and the line between them.
MIN_MODEL_OUTPUT_BYTES = 1024
#: Room kept for the line between the head and the tail (the place it names comes on top).
_MARKER_ROOM = 240
#: A cut moves back (or on) to a line's end when one is this near (a fraction of its side).
_SNAP = 4

#: Where a part of a text starts: its name and its offset in the text's UTF-8 bytes.
Sections = tuple[tuple[str, int], ...]


@dataclass(frozen=True)
class ModelText:
    """A text as the model reads it: whole, or its head and tail around one line."""

    text: str
    lines_left_out: int = 0
    """Lines not shown in full."""
    bytes_left_out: int = 0
    parts_cut: tuple[str, ...] = ()
    """The parts of the text the cut went through (``"logs"``, ``"result"``, ...)."""
    where: str | None = None
    """Where the whole text is kept, if it is."""

    @property
    def is_cut(self) -> bool:
        """True if part of the text was left out."""
        return self.bytes_left_out > 0


def success_text(
    logs: Sequence[str], value: Any, has_value: bool, is_repr: bool = False
) -> tuple[str, Sections]:
    """The text of a run that succeeded (``logs:`` and ``result:``), and its parts
    (``is_repr``: the value is the repr of a bare last expression that is not JSON)."""
    pieces: list[tuple[str, str]] = []
    if logs:
        pieces.append(("logs", "logs:\n" + "\n".join(logs)))
    if has_value and is_repr:
        pieces.append(("result", f"result (repr, not JSON):\n{value}"))
    elif has_value:
        pieces.append(("result", "result:\n" + msgspec.json.encode(value).decode()))
    if not pieces:
        return "(no logs, no result)", ()
    return _joined(pieces)


def failure_text(kind: str, message: str, logs: Sequence[str]) -> tuple[str, Sections]:
    """The text of a run that failed (the failure, then the logs so far), and its parts."""
    pieces = [("failure", f"Error: the program failed ({kind}): {message}")]
    if logs:
        pieces.append(("logs", "logs so far:\n" + "\n".join(logs)))
    return _joined(pieces)


def _joined(pieces: list[tuple[str, str]]) -> tuple[str, Sections]:
    sections, offset = [], 0
    for name, text in pieces:
        sections.append((name, offset))
        offset += len(text.encode()) + 1
    return "\n".join(text for _, text in pieces), tuple(sections)


def left_out_line(
    lines: int,
    size: int,
    parts: Sequence[str] = (),
    where: str | None = None,
    *,
    otherwise: str = "print or return less to see it",
) -> str:
    """The one line that stands for what a cut left out: how much, of which parts, and where
    the whole text is (``otherwise`` when it is kept nowhere)."""
    noun = "line" if lines == 1 else "lines"
    of = f" of the {' and '.join(parts)}" if parts else ""
    cut = "; the result is cut: what is shown of it is not whole JSON" if "result" in parts else ""
    then = f"the whole text: {where}" if where else otherwise
    return f"[... {lines:,} {noun} ({size:,} bytes){of} left out here{cut}; {then}]"


def cut_to_budget(
    text: str,
    max_bytes: int,
    *,
    sections: Sections = (),
    keep: Callable[[str], str | None] | None = None,
) -> ModelText:
    """``text`` whole if its UTF-8 bytes fit ``max_bytes``; else its head and its tail (at
    line ends where one is near) around one line saying what was left out. ``keep`` is
    called with the whole text only when it is cut, and says where it keeps it (or None)."""
    data = text.encode()
    if len(data) <= max_bytes:
        return ModelText(text)
    where = keep(text) if keep is not None else None
    room = max(max_bytes - _MARKER_ROOM - len((where or "").encode()), 2)
    head_end = _head_end(data, room // 2)
    tail_start = _tail_start(data, len(data) - (room - room // 2))
    first = data.count(b"\n", 0, head_end)  # the line the cut starts in
    last = data.count(b"\n", 0, tail_start) - (data[tail_start - 1] == ord("\n"))
    ends = [start for _, start in sections[1:]] + [len(data)] * bool(sections)
    parts = tuple(
        name
        for (name, start), end in zip(sections, ends, strict=True)
        if start < tail_start and end > head_end
    )
    lines, size = last - first + 1, tail_start - head_end
    head = data[:head_end].decode()
    marker = left_out_line(lines, size, parts, where)
    shown = f"{head}{'' if head.endswith(chr(10)) or not head else chr(10)}{marker}\n"
    return ModelText(shown + data[tail_start:].decode(), lines, size, parts, where)


def _head_end(data: bytes, limit: int) -> int:
    """Where the head ends: after a line's end near ``limit``, else at a character's start."""
    newline = data.rfind(b"\n", limit - limit // _SNAP, limit)
    if newline >= 0:
        return newline + 1
    while limit > 0 and data[limit] & 0xC0 == 0x80:  # inside a UTF-8 sequence
        limit -= 1
    return limit


def _tail_start(data: bytes, start: int) -> int:
    """Where the tail starts: after a line's end near ``start``, else at a character's start."""
    newline = data.find(b"\n", start, start + (len(data) - start) // _SNAP)
    if newline >= 0:
        return newline + 1
    while start < len(data) and data[start] & 0xC0 == 0x80:
        start += 1
    return start
