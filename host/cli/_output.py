"""Where the command's output goes: stdout is the result's alone; the terminal never garbles.

``claim_stdout`` moves fd 1 to stderr for everything else (bindings files, tools, their
subprocesses) and keeps a private descriptor for the result. ``Display`` prints log lines
above one live status line on stderr, pauses it for prompts and erases it on every exit
path. Nothing a program chose reaches a terminal as a control sequence (a window title, a
clipboard write, a cleared screen): ``for_terminal`` shows control characters escaped, and
every path to a terminal uses it: ``write_result``, ``Display``, the prompts, and
``sys.stderr`` itself, which ``claim_stdout`` makes escape whatever is written to it (our
messages, a tool's ``print``, a log handler) when it is a terminal.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import sys
import time
from collections.abc import Iterator
from typing import IO, TYPE_CHECKING, Any, Final, TextIO, cast

if TYPE_CHECKING:
    from host.cli._logview import TerminalLogView

__all__ = (
    "Display",
    "claim_stdout",
    "for_terminal",
    "is_terminal",
    "result_stream",
    "unescaped",
    "write_result",
)

_CONTROL: Final = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
_ERASE: Final = "\r\x1b[2K"
_DIM: Final = "\x1b[2m"
_RESET: Final = "\x1b[0m"

_claimed: list[TextIO] = []
_outer: list[TextIO] = []  # sys.stdout before ``stdout_to_stderr`` (no claim: a test runner)


def _escape(match: re.Match[str]) -> str:
    return f"\\x{ord(match.group()):02x}"


def for_terminal(text: str) -> str:
    """Control and escape characters (ESC, CR, BEL, C1, ...) as ``\\xNN``; tabs and newlines kept."""
    return _CONTROL.sub(_escape, text)


class _Escaping:
    """A terminal's text stream that writes control characters escaped (``for_terminal``)."""

    def __init__(self, terminal: TextIO) -> None:
        self.unescaped = terminal
        """The stream itself, for the command's own control sequences (the status line)."""

    def write(self, text: str) -> int:
        self.unescaped.write(for_terminal(text))
        return len(text)

    def writelines(self, lines: Any) -> None:
        for line in lines:
            self.write(line)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.unescaped, name)


def unescaped(stream: TextIO) -> TextIO:
    """The stream under ``sys.stderr``'s escaping (the stream itself if it has none)."""
    inner: TextIO = getattr(stream, "unescaped", stream)
    return inner


def claim_stdout() -> None:
    """Give the result a private copy of fd 1, and point fd 1 (and ``sys.stdout``) at stderr;
    a terminal on stderr gets every write escaped."""
    if _claimed:
        return
    if is_terminal(sys.stderr) and not isinstance(sys.stderr, _Escaping):
        sys.stderr = cast(TextIO, _Escaping(sys.stderr))
    try:
        private = os.dup(1)
        os.set_inheritable(private, False)
        os.dup2(2, 1)
    except OSError:  # no stdout, or no stderr: nothing to protect
        return
    # Buffered: a raw FileIO under a TextIOWrapper drops what a short write (a signal
    # arriving while a pipe is full) did not take; BufferedWriter writes the rest.
    raw = io.BufferedWriter(io.FileIO(private, "w", closefd=True))
    stream = io.TextIOWrapper(raw, encoding="utf-8", errors="replace", newline="\n")
    _claimed.append(stream)
    sys.stdout = stream  # typer's own help and --version go to the real stdout


def result_stream() -> TextIO:
    """The stream the result is written to (the claimed stdout, else the real ``sys.stdout``)."""
    if _claimed:
        return _claimed[0]
    return _outer[0] if _outer else sys.stdout


def write_result(text: str) -> None:
    """Write ``text`` to the result stream (escaped at a terminal) and flush; a closed pipe is
    not an error of ours."""
    stream = result_stream()
    with contextlib.suppress(OSError, ValueError, AttributeError):  # closed, or no stdout at all
        stream.write(for_terminal(text) if is_terminal(stream) else text)
        stream.flush()


@contextlib.contextmanager
def stdout_to_stderr() -> Iterator[TextIO]:
    """While a command runs: ``print`` goes to stderr; yields the result stream."""
    out = result_stream()
    _outer.insert(0, out)
    try:
        with contextlib.redirect_stdout(sys.stderr):
            yield out
    finally:
        _outer.remove(out)


def is_terminal(stream: IO[str] | None) -> bool:
    try:
        return stream is not None and stream.isatty()
    except (ValueError, OSError):
        return False


class Display:
    """Log lines on ``out``, a live status line on ``err``, never sharing a line."""

    def __init__(self, out: TextIO, err: TextIO, *, status: bool) -> None:
        self.out = out
        self.err = unescaped(err)  # its own sequences draw the status line; text is escaped
        self.out_is_terminal = is_terminal(out)
        self.err_is_terminal = is_terminal(err)
        self.status_enabled = status and self.err_is_terminal
        self._shown = False
        self._paused = 0
        self._held: list[str] = []
        self._text = ""
        self.view: TerminalLogView | None = None

    def limit_logs(self, where: str | None) -> None:
        """At a terminal: log lines past a screenful as a head, one line, a tail (``where``:
        where every line is kept, named in that line)."""
        if not self.out_is_terminal:
            return
        try:
            size = os.get_terminal_size(self.out.fileno())
        except (OSError, ValueError):
            return
        from host.cli._logview import TerminalLogView

        self.view = TerminalLogView(self._emit, size.lines, size.columns, where)

    def _width(self) -> int:
        try:
            return max(os.get_terminal_size(self.err.fileno()).columns - 1, 10)
        except (OSError, ValueError):
            return 79

    def _write_err(self, text: str) -> None:
        with contextlib.suppress(OSError, ValueError, AttributeError):
            self.err.write(text)
            self.err.flush()

    def _erase(self) -> None:
        if self._shown:
            self._write_err(_ERASE)
            self._shown = False

    def _draw(self) -> None:
        if not self.status_enabled or self._paused or not self._text:
            return
        self._write_err(_ERASE + _DIM + self._text[: self._width()] + _RESET)
        self._shown = True

    def status(self, text: str) -> None:
        """Show ``text`` as the status line (redrawn in place)."""
        held = self.view.held if self.view is not None else 0
        self._text = text + (f"  ({held} log lines shown at the end)" if held else "")
        self._draw()

    def line(self, text: str) -> None:
        """Print one log line above the status line (held while a prompt is shown)."""
        if self._paused:
            self._held.append(text)
            return
        self._log(text)

    def _log(self, text: str) -> None:
        if self.view is not None:
            self.view.line(text)
        else:
            self._emit(text)

    def _emit(self, text: str) -> None:
        if self.out_is_terminal:
            text = for_terminal(text)
        shared = self.out_is_terminal and self._shown  # the same terminal, most likely
        if shared:
            self._erase()
        with contextlib.suppress(OSError, ValueError, AttributeError):  # no stdout: nothing to do
            self.out.write(text + "\n")
            self.out.flush()
        if shared:
            self._draw()

    def notice(self, text: str) -> None:
        """One line of the command's own on stderr, above the status line."""
        shown = self._shown
        self._erase()
        if self.err_is_terminal:
            text = for_terminal(text)
        self._write_err(("\n" if self._paused else "") + text + "\n")  # below a pending prompt
        if shown:
            self._draw()

    @contextlib.contextmanager
    def paused(self) -> Iterator[None]:
        """For a prompt: the status line erased, log lines held until the answer."""
        self._paused += 1
        self._erase()
        try:
            yield
        finally:
            self._paused -= 1
            if not self._paused:
                held, self._held = self._held, []
                for text in held:
                    self._log(text)
                self._draw()

    def close(self) -> None:
        """Erase the status line and stop drawing it; the logs' tail (every exit path)."""
        self.status_enabled = False
        for text in self._held:
            self._log(text)
        self._held = []
        self._erase()
        view, self.view = self.view, None
        if view is not None:
            view.finish()


def status_text(started: float, compute_ms: float, budget_ms: int, calls: int) -> str:
    """``dsh-code  1.2s  compute 0.40/60s  3 calls``."""
    elapsed = time.monotonic() - started
    noun = "call" if calls == 1 else "calls"
    return (
        f"dsh-code  {elapsed:.1f}s  compute {compute_ms / 1000:.2f}/{budget_ms / 1000:g}s"
        f"  {calls} {noun}  (Ctrl-C aborts)"
    )


_json_written: list[bool] = []


def wants_json(args: list[str]) -> bool:
    """Whether the command line asks ``run`` for one JSON object (``--json`` before ``--``)."""
    head = args[: args.index("--")] if "--" in args else args
    return "--json" in head and "run" in head


def reset_json() -> None:
    """A new command: its ``--json`` object is still to be written."""
    _json_written.clear()


def write_json(obj: object) -> bool:
    """Write the one ``--json`` object (a second call writes nothing); True if written."""
    import json

    if _json_written:
        return False
    _json_written.append(True)
    write_result(json.dumps(obj, ensure_ascii=False) + "\n")
    return True


def interrupted(args: list[str], signum: int) -> int:
    """A signal before or after the event loop: one line, the ``--json`` object, the code."""
    import signal

    name = signal.Signals(signum).name
    with contextlib.suppress(OSError, ValueError):
        sys.stderr.write(f"\ndsh-code: interrupted by {name}\n")
    if wants_json(args):
        message = f"interrupted by {name} before the run started"
        write_json({"logs": [], "error": {"kind": "aborted", "message": message}})
    return 128 + signum


def finish(code: int) -> None:
    """Flush what the command wrote and exit at once (no thread, no atexit hook waited for)."""
    for stream in (result_stream(), sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(code)


def report_usage(message: str, *, json_output: bool, detail: str | None = None) -> None:
    """A usage error: one line (or ``detail``) on stderr, and the ``--json`` object."""
    with contextlib.suppress(OSError, ValueError):
        sys.stderr.write(f"{detail}\n" if detail else f"error: {message}\n")
    if json_output:
        write_json({"error": {"kind": "usage", "message": message}})
