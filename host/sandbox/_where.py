"""Where a program was when a budget stopped it: its innermost frames, as a traceback shows them.

At a budget the child's process gets SIGXCPU (its own CPU timer, or the host just before the
kill); ``faulthandler``, armed in the child, writes every thread's stack to a pipe of the
run's own before the process dies. That text comes from the child: it is read bounded, and
only frames of the program's own file are kept, innermost last, with their lines from the
program as the host has it.
"""

from __future__ import annotations

import os
import re
from typing import Final

from runtime.lowlevel import source_lines

__all__ = ("MAX_DUMP_BYTES", "program_location", "read_dump")

#: The most of a stack dump read from the child (every thread of a busy program fits).
MAX_DUMP_BYTES: Final = 64 * 1024
#: Frames shown: the innermost few of the program's own.
_FRAMES: Final = 3
_NAME_SHOWN: Final = 80
_LINE_SHOWN: Final = 160
_FRAME: Final = re.compile(r'^  File "<program>", line (\d{1,9}) in (.+)$')
_THREAD: Final = re.compile(r"^(Current thread|Thread|Stack)\b.*\(most recent call first\):$")


def read_dump(fd: int) -> bytes:
    """What the child wrote on its stack-dump pipe so far (at most ``MAX_DUMP_BYTES``)."""
    data = b""
    while len(data) < MAX_DUMP_BYTES:
        try:
            chunk = os.read(fd, MAX_DUMP_BYTES - len(data))
        except OSError:  # nothing more now (the pipe is non-blocking), or closed
            break
        if not chunk:
            break
        data += chunk
    return data


def program_location(dump: bytes, source: str) -> tuple[str, int] | None:
    """The program's innermost frames in ``dump`` (``faulthandler``'s text) as traceback
    lines, most recent call last, and the line it was at; None if no frame is the program's."""
    stacks: list[tuple[bool, list[tuple[int, str]]]] = []
    for line in dump.decode("utf-8", "replace").splitlines():
        if _THREAD.match(line):
            stacks.append((line.startswith("Current"), []))
        elif stacks and (found := _FRAME.match(line)):
            stacks[-1][1].append((int(found.group(1)), found.group(2)))
    # The thread that took the signal first (the busy one, most often), else any of them.
    stacks.sort(key=lambda stack: not stack[0])
    frames = next((frames for _, frames in stacks if frames), None)
    if frames is None:
        return None
    lines = source_lines(source)
    shown = []
    for lineno, name in reversed(frames[:_FRAMES]):
        short = name if len(name) <= _NAME_SHOWN else name[: _NAME_SHOWN - 1] + "…"
        shown.append(f'  File "<program>", line {lineno}, in {short}')
        text = lines[lineno - 1].strip() if 0 < lineno <= len(lines) else ""
        if text:
            shown.append("    " + (text if len(text) <= _LINE_SHOWN else text[:_LINE_SHOWN] + "…"))
    return "\n".join(shown), frames[0][0]
