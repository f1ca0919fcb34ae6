"""``dsh-code repl``: an interactive prompt where each input is one run in a fresh child,
carrying the program's variables to the next (a session).

The main thread owns the terminal: it reads input with readline (history, line editing),
and a block continues while it is incomplete, until a blank line, as Python's REPL does.
The event loop runs on a thread of its own (``ReplEngine``). Signals: Ctrl-C cancels the
input being typed, or aborts the run in progress (a second Ctrl-C while it stops exits at
once); SIGTERM and SIGHUP end the REPL (runs aborted, the runtime and MCP servers stopped,
within a bound); Ctrl-D at the prompt ends it with exit 0.
"""

from __future__ import annotations

import ast
import codeop
import collections
import contextlib
import os
import queue
import signal
import sys
import tempfile
import threading
import warnings
from collections.abc import Iterator
from concurrent.futures import Future
from pathlib import Path
from types import FrameType
from typing import Any, Final

import msgspec

from host.cli._output import for_terminal, is_terminal, result_stream, write_result
from host.cli._repl_engine import Question, ReplEngine, ReplPlan
from host.cli._run import render_dropped, render_failure, render_value, state_hint
from host.cli._session_file import SessionFileError, write_session_file
from host.cli._signals import SIGNALS, Stopper, abort_notice, exit_code_for, signal_name
from runtime import RunResult

__all__ = ("needs_more", "run_repl")

PROMPT: Final = ">>> "
MORE: Final = "... "
_POLL_S: Final = 0.05
_HISTORY_LINES: Final = 1000
_PARSE: Final = (
    ast.PyCF_ONLY_AST
    | getattr(codeop, "PyCF_DONT_IMPLY_DEDENT", 0x200)
    | getattr(codeop, "PyCF_ALLOW_INCOMPLETE_INPUT", 0x4000)
)


def needs_more(source: str) -> bool:
    """Whether ``source`` is an incomplete block (more lines to come), as Python's REPL
    decides it; only parsed (top-level ``await`` and ``return`` are a program's to use)."""
    if all(not line.strip() or line.strip().startswith("#") for line in source.split("\n")):
        return False
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", (SyntaxWarning, DeprecationWarning))
        try:
            compile(source, "<input>", "single", _PARSE, True)
            return False
        except (SyntaxError, ValueError, OverflowError):
            pass
        try:
            compile(source + "\n", "<input>", "single", _PARSE, True)
            return True
        except SyntaxError as exc:
            return "incomplete input" in str(exc)
        except (ValueError, OverflowError):
            return False


class _Signalled(Exception):
    """A signal arrived while the prompt waited for a line."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal_name(signum))
        self.signum = signum


class _Signals:
    """SIGINT, SIGTERM, SIGHUP at the REPL: raised into ``input()``, else recorded."""

    def __init__(self, stopper: Stopper) -> None:
        self.stopper = stopper
        self.pending: collections.deque[int] = collections.deque()
        self.in_input = False
        self.aborting = False
        """A run is being aborted: another Ctrl-C exits at once."""
        self.stopping: int | None = None
        """The signal that ends the REPL (SIGTERM, SIGHUP, or any during start-up)."""

    def handle(self, signum: int, _frame: FrameType | None = None) -> None:
        if self.stopping is not None or (self.aborting and signum == signal.SIGINT):
            self.stopper.hard_exit(signum)
        if signum != signal.SIGINT:
            self.stopping = signum
        if self.in_input:
            self.in_input = False
            raise _Signalled(signum)
        self.pending.append(signum)

    def take(self) -> int | None:
        """The next signal recorded, if any."""
        return self.pending.popleft() if self.pending else None

    @contextlib.contextmanager
    def installed(self) -> Iterator[None]:
        previous = {sig: signal.getsignal(sig) for sig in SIGNALS}
        for sig in SIGNALS:
            signal.signal(sig, self.handle)
        try:
            yield
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)

    def input(self, prompt: str) -> str:
        """A line from the terminal (readline, when stdin and stdout's fd are terminals)."""
        out = sys.stdout
        sys.stdout = sys.__stdout__ or out  # fd 1 (now stderr's): what readline writes to
        self.in_input = True
        try:
            return input(prompt)
        finally:
            self.in_input = False
            sys.stdout = out


def _say(text: str) -> None:
    with contextlib.suppress(OSError, ValueError):
        sys.stderr.write(text + "\n")
        sys.stderr.flush()


def _history_problem(path: Path) -> str | None:
    """Why the history file cannot be read and replaced, if it cannot (checked at the start)."""
    folder = path.parent
    if path.is_dir():
        return "it is a directory; give a file (or --no-history)"
    if not folder.is_dir():
        return f"{folder} is not a directory; give a file in one (or --no-history)"
    if not os.access(folder, os.W_OK | os.X_OK):
        return f"{folder} cannot be written; give a file elsewhere (or --no-history)"
    if path.exists() and not os.access(path, os.R_OK):
        return "it cannot be read; give another file (or --no-history)"
    return None


class _History:
    """readline's history, loaded from and saved to a file (mode 0600, atomically)."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self.readline: Any = None
        if not (sys.stdin is not None and sys.stdin.isatty()):
            return
        try:
            import readline
        except ImportError:  # a Python built without it: plain input() still works
            return
        self.readline = readline
        readline.parse_and_bind("tab: tab-insert")  # indentation, not file names
        readline.set_history_length(_HISTORY_LINES)
        problem = None if path is None else _history_problem(path)
        if problem is not None:
            _say(f"dsh-code: warning: the history cannot be kept in {path}: {problem}")
            self.path = None
        elif path is not None and path.is_file() and not path.is_symlink():
            with contextlib.suppress(OSError):
                readline.read_history_file(str(path))

    def save(self) -> None:
        if self.readline is None or self.path is None:
            return
        try:
            fd, temporary = tempfile.mkstemp(prefix=".dsh-history.", dir=self.path.parent)
            os.close(fd)
            try:
                self.readline.write_history_file(temporary)
                os.replace(temporary, self.path)
            finally:
                with contextlib.suppress(OSError):
                    os.unlink(temporary)
        except OSError as exc:
            _say(f"dsh-code: cannot save the history to {self.path}: {exc.strerror or exc}")


class _Repl:
    """The main thread's loop: read an input, run it, show what it did, until the end."""

    def __init__(self, plan: ReplPlan, stopper: Stopper, portal: Any, signals: _Signals) -> None:
        self.plan = plan
        self.stopper = stopper
        self.portal = portal
        self.signals = signals
        self.events: queue.Queue[tuple[str, Any]] = queue.Queue()
        self.engine = ReplEngine(plan, self.events)
        self.timers: list[threading.Timer] = []

    def _bound(self, signum: int, why: str) -> None:
        """The clean-up after ``signum`` may take ``grace_s``; past it, exit at once."""
        timer = threading.Timer(self.stopper.grace_s, self.stopper.hard_exit, (signum, why))
        timer.daemon = True
        timer.start()
        self.timers.append(timer)

    def _unbound(self) -> None:
        for timer in self.timers:
            timer.cancel()
        self.timers.clear()

    def _next_event(self) -> tuple[str, Any] | None:
        try:
            return self.events.get(timeout=_POLL_S)
        except queue.Empty:
            return None

    def start(self) -> Future[None]:
        """Start the engine; its future (done when it has stopped everything)."""
        future: Future[None] = self.portal.start_task_soon(self.engine.serve)
        future.add_done_callback(lambda done: self.events.put(("ended", done)))
        return future

    def wait_ready(self) -> int | None:
        """The tool count once the engine is ready; None if a signal stopped the start."""
        while True:
            signum = self.signals.take()
            if signum is not None:
                self.signals.stopping = signum
                self._bound(signum, f"the start took longer than {self.stopper.grace_s:g} s")
                self.portal.call(self.engine.cancel_start)
            event = self._next_event()
            if event is None:
                continue
            kind, item = event
            if kind == "ready":
                return None if self.signals.stopping is not None else int(item)
            if kind == "ended":
                item.result()  # the start failed: its error is the command's
                return None

    def read(self) -> str | None:
        """The next complete input; None at the end (Ctrl-D, SIGTERM, SIGHUP)."""
        self.signals.pending.clear()  # a Ctrl-C between runs is not meant for the next one
        lines: list[str] = []
        while self.signals.stopping is None:
            try:
                line = self.signals.input(MORE if lines else PROMPT)
            except EOFError:
                _say("")
                return None
            except _Signalled as exc:
                if exc.signum != signal.SIGINT:
                    return None
                _say("\nKeyboardInterrupt")  # the input is dropped, as Python's REPL does
                lines = []
                continue
            if not lines and not line.strip():
                continue
            lines.append(line)
            source = "\n".join(lines)
            if not needs_more(source):
                return source
        return None

    def _stop_run(self, signum: int) -> None:
        self.signals.aborting = True
        name = signal_name(signum)
        self._bound(signum, f"the run did not stop within {self.stopper.grace_s:g} s")
        notice = abort_notice(signum)
        self.portal.call(self.engine.abort, f"interrupted by {name}", notice)

    def _answer(self, question: Question) -> None:
        answer = False
        try:
            line = self.signals.input(f"{for_terminal(question.text)} [y/N]: ")
            answer = line.strip().lower() in ("y", "yes")
        except EOFError:
            pass
        except _Signalled as exc:
            self._stop_run(exc.signum)
        self.portal.call(question.set, answer)

    def run(self, source: str) -> tuple[RunResult, int | None]:
        """Run one input; its result, and the signal that aborted it (if one did)."""
        future: Future[RunResult] = self.portal.start_task_soon(self.engine.run, source)
        future.add_done_callback(lambda done: self.events.put(("done", done)))
        stopped_by: int | None = None
        try:
            while True:
                signum = self.signals.take()
                if signum is not None and stopped_by is None:
                    stopped_by = signum
                    self._stop_run(signum)
                event = self._next_event()
                if event is None:
                    continue
                kind, item = event
                if kind == "ask":
                    self._answer(item)
                elif kind == "done" and item is future:
                    return future.result(), stopped_by
                elif kind == "ended":
                    item.result()
                    raise RuntimeError("the REPL's event loop ended during a run")
        finally:
            self.signals.aborting = False
            self._unbound()

    def show(self, result: RunResult, signum: int | None) -> None:
        """What the run did: the result as ``run`` prints it, or a readable failure."""
        if signum is not None and result.error is not None and result.error.kind == "aborted":
            reason = f"interrupted by {signal_name(signum)}"
            result = msgspec.structs.replace(
                result, error=msgspec.structs.replace(result.error, message=reason)
            )
        if result.error is None:
            if result.has_value:
                terminal = is_terminal(result_stream())
                shown = render_value(result.value, terminal=terminal, is_repr=result.value_is_repr)
                write_result(shown + "\n")
            if result.state_dropped:
                _say(render_dropped(result.state_dropped))
            self.save()
        else:
            _say(render_failure(result.error, terminal=is_terminal(sys.stderr)))
            hint = state_hint(result.error, self.plan.session_file)
            if hint is not None:
                _say(hint)
            if result.error.kind in ("exception", "invalid_completion"):
                self.save()  # the names it assigned before the failure were kept

    def save(self) -> None:
        path, session = self.plan.session_file, self.engine.session
        if path is None or session is None:
            return
        try:
            write_session_file(path, session.state)
        except SessionFileError as exc:
            _say(f"dsh-code: {exc}")

    def close(self, future: Future[None]) -> None:
        """Stop the engine (runtime, MCP servers) within the bound."""
        signum = self.signals.stopping or signal.SIGTERM
        self._bound(signum, f"the clean-up took longer than {self.stopper.grace_s:g} s")
        try:
            self.portal.call(self.engine.close)
            while not future.done():
                self.signals.take()  # a signal now: the handler exits at once on a second
                event = self._next_event()
                if event is not None and event[0] == "ask":
                    self.portal.call(event[1].set, False)
            future.result()
        finally:
            self._unbound()


def _banner(plan: ReplPlan, tools: int) -> str:
    noun = "tool" if tools == 1 else "tools"
    lines = [f"dsh-code repl: {tools} {noun}; each input runs in a fresh child, variables persist"]
    if plan.session_file is not None:
        verb = "continues from" if plan.state else "saved to"
        lines.append(f"session: {verb} {plan.session_file}")
    lines.append("(a blank line ends a block; Ctrl-C cancels the input or the run; Ctrl-D exits)")
    return "\n".join(lines)


def run_repl(plan: ReplPlan, stopper: Stopper, history: Path | None) -> int:
    """Run the REPL to its end; the exit code (0 after Ctrl-D, 128 + N after signal N)."""
    from anyio.from_thread import start_blocking_portal

    signals = _Signals(stopper)
    with signals.installed(), start_blocking_portal() as portal:
        repl = _Repl(plan, stopper, portal, signals)
        future = repl.start()
        try:
            tools = repl.wait_ready()
            if tools is not None:
                _say(_banner(plan, tools))
                saved = _History(history)
                try:
                    while (source := repl.read()) is not None:
                        result, signum = repl.run(source)
                        repl.show(result, signum)
                finally:
                    saved.save()
        finally:
            repl.close(future)
    return exit_code_for(signals.stopping) if signals.stopping is not None else 0
