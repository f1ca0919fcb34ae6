"""The child's side of a resume: the program's calls that the journal recorded are answered
here, from the journal, without crossing to the host.

Each call the program makes is numbered as it is issued (its ``seq``); one the journal
recorded must ask what the journal says (name and arguments), or the run fails with
``replay_diverged``. Its recorded answer is given when every recorded call that settled
before it has been answered, so the program's tasks wake in the order they woke the first
time, and a call issued after an answer gets the number it had. Answers are given through
the asking loop's queue (never at once), as a reply from the host would be. If the answers
wait longer than ``PATIENCE_S`` for a call the program does not make, the order is given up:
every recorded answer is then given as soon as its call is asked.
"""

from __future__ import annotations

import random
import threading
from collections.abc import Callable
from typing import Any, NoReturn

import msgspec

from runtime._errors import tool_call_error
from runtime._journal import JournalCall, same_json, shown
from runtime._wire import ChildFailureKind, Start

__all__ = ("PATIENCE_S", "Replayer", "prepare_replay")

#: How long recorded answers wait for a call the program has not made yet.
PATIENCE_S = 0.5
_decoder = msgspec.json.Decoder(list[JournalCall])


class Replayer:
    """Answers the recorded calls of a resumed run, in the order they settled."""

    def __init__(
        self,
        calls: list[JournalCall],
        deliver: Callable[[Any, Any, BaseException | None], None],
        fail: Callable[[ChildFailureKind, str], NoReturn],
    ) -> None:
        self._index = {call.seq: i for i, call in enumerate(calls)}
        self._calls = calls
        self._deliver = deliver
        self._fail = fail
        self._asked = [False] * len(calls)
        self._waiting: dict[int, Any] = {}  # index -> waiter, asked and not yet answered
        self._cursor = 0  # answers before it were given in order
        self._relaxed = False
        self._lock = threading.Lock()

    def records(self, seq: int) -> bool:
        """Whether call ``seq`` is answered here."""
        return seq in self._index

    def ask(self, seq: int, name: str, args: bytes, waiter: Any) -> None:
        """The program asked call ``seq``: check it against the journal, answer it in turn."""
        index = self._index[seq]
        call = self._calls[index]
        if call.name != name or not same_json(call.args, args):
            self._fail(
                "replay_diverged",
                f"the replay diverged at step {seq}: the journal has {call.name}"
                f"({shown(call.args)}), the program asked {name}({shown(args)})",
            )
        with self._lock:
            self._asked[index] = True
            self._waiting[index] = waiter
            ready = self._ready()
            stalled = bool(self._waiting)
        self._give(ready)
        if stalled:
            self._watch(waiter)

    def _ready(self) -> list[tuple[Any, JournalCall]]:
        """The answers that may be given now (under the lock)."""
        if self._relaxed:
            out = [(w, self._calls[i]) for i, w in sorted(self._waiting.items())]
            self._waiting.clear()
            return out
        out = []
        while self._cursor in self._waiting:
            out.append((self._waiting.pop(self._cursor), self._calls[self._cursor]))
            self._cursor += 1
        return out

    def _give(self, ready: list[tuple[Any, JournalCall]]) -> None:
        for waiter, call in ready:
            if call.error is not None:
                error = call.error
                failed = tool_call_error(
                    error.tool, error.message, error.code, error.exception_type
                )
                self._deliver(waiter, None, failed)
            else:
                value = msgspec.json.decode(call.value) if call.value else None
                self._deliver(waiter, value, None)

    def _watch(self, waiter: Any) -> None:
        """Give the order up if the answers still wait after the patience."""
        cursor = self._cursor
        loop = getattr(waiter, "loop", None)
        if loop is not None:
            loop.call_later(PATIENCE_S, self._relax_if_stuck, cursor)
        else:  # a thread blocked in a plain call: a timer of ours wakes it
            timer = threading.Timer(PATIENCE_S, self._relax_if_stuck, (cursor,))
            timer.daemon = True
            timer.start()

    def _relax_if_stuck(self, cursor: int) -> None:
        with self._lock:
            if self._cursor != cursor or not self._waiting:
                return
            self._relaxed = True
            ready = self._ready()
        self._give(ready)

    def unasked(self) -> list[JournalCall]:
        """The recorded calls the program has not asked (by the end, a divergence)."""
        return [call for call, asked in zip(self._calls, self._asked, strict=True) if not asked]

    def check_complete(self) -> None:
        """At the program's end: every recorded call must have been asked again."""
        missing = self.unasked()
        if missing:
            first = min(missing, key=lambda call: call.seq)
            self._fail(
                "replay_diverged",
                f"the replay diverged at step {first.seq}: the journal has {first.name}"
                f"({shown(first.args)}), and the program ended without asking it",
            )


def prepare_replay(start: Start, bridge: Any, reporter: Any) -> None:
    """Before the program: seed ``random`` as the journal says, and answer recorded calls."""
    if start.random_seed:
        random.seed(start.random_seed)
    calls = _decoder.decode(start.replay)
    if not calls:
        return
    replayer = Replayer(calls, bridge.deliver_replayed, bridge.fail)
    bridge.replayer = replayer
    reporter.before_done = replayer.check_complete
