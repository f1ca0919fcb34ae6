"""Budgets that nothing a program does can starve: a thread per runtime enforces every run's
wall and compute budget, killing the run itself; the event loop only reports.

A run's outcome is claimed once, by whoever is first: the run's own handling of the child's
report on the event loop, or the watchdog when a budget runs out (it kills the run's
processes right after its claim, so the loop learns of it when the child dies, however busy
the loop is).
"""

from __future__ import annotations

import heapq
import itertools
import logging
import os
import threading
import time
from collections.abc import Callable
from typing import Any

from runtime import RunError

__all__ = ("Guard", "Watchdog")

_log = logging.getLogger("host.sandbox")
_CPUS = os.cpu_count() or 1
#: The shortest and longest sleeps between two looks at a run's compute.
_POLL_MIN_S = 0.00025
_POLL_MAX_S = 0.05


class Guard:
    """One run's budgets and its single outcome, shared by the event loop and the watchdog."""

    def __init__(
        self,
        *,
        wall_s: float,
        compute_ms: int,
        measure: Callable[[], int],
        kill: Callable[[], None],
        locate: Callable[[], None] | None = None,
    ) -> None:
        self.started = time.monotonic()
        self.deadline = self.started + wall_s
        self.wall_ms = round(wall_s * 1000)
        self.compute_ms = compute_ms
        self.budget_ns = compute_ms * 1_000_000
        self._measure = measure  # busy CPU of the run since it began billing, in ns
        self._kill = kill
        self._locate = locate  # asks the program where it is, waiting a moment for the answer
        self._lock = threading.Lock()
        self.outcome: Any = None
        self.billing = False  # compute is billed from the child's Ready
        self.cpu_ns = 0
        self.look_id = 0  # the watchdog's latest look scheduled for this guard (older: stale)

    def claim(self, outcome: Any) -> bool:
        """Make ``outcome`` the run's, if none is yet; True if it is now."""
        with self._lock:
            if self.outcome is not None:
                return False
            self.outcome = outcome
            return True

    def measure(self) -> int:
        """Look at the run's compute now (never less than the last look)."""
        if self.billing:
            try:
                self.cpu_ns = max(self.cpu_ns, self._measure())
            except Exception:
                _log.exception("dsh-code: measuring a run's compute failed")
        return self.cpu_ns

    def expire(self, budget: str) -> None:
        """A budget ran out: claim the outcome, then kill (the claim first: the death it
        causes must not read as the program's own)."""
        if budget == "wall":
            message = f"the run passed its wall-clock budget of {self.wall_ms} ms"
        else:
            message = f"the run passed its compute budget of {self.compute_ms} ms"
        if self.claim(RunError(kind="budget", budget=budget, message=message)):  # type: ignore[arg-type]
            if self._locate is not None:
                try:
                    self._locate()
                except Exception:
                    _log.exception("dsh-code: asking a run where it is failed")
            self.kill()

    def kill(self) -> None:
        """Kill every process of the run (idempotent, any thread)."""
        try:
            self._kill()
        except Exception:
            _log.exception("dsh-code: killing a run failed")

    def next_look(self, now: float) -> float:
        """When the watchdog should look at this run again."""
        if not self.billing:
            return self.deadline  # ``Watchdog.billing`` looks again once billing starts
        remaining_s = (self.budget_ns - self.cpu_ns) / 1e9
        # the run cannot burn faster than every CPU at once: half the time it would take
        pause = min(max(remaining_s / _CPUS / 2, _POLL_MIN_S), _POLL_MAX_S)
        return min(self.deadline, now + pause)


class Watchdog:
    """The thread that looks after every guard of a runtime."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._heap: list[tuple[float, int, Guard]] = []  # (when, look id, guard)
        self._live: set[Guard] = set()
        self._order = itertools.count()
        self._thread: threading.Thread | None = None
        self._stopping = False

    def _schedule(self, guard: Guard, when: float) -> None:
        guard.look_id = next(self._order)
        heapq.heappush(self._heap, (when, guard.look_id, guard))

    def watch(self, guard: Guard) -> None:
        """Enforce ``guard``'s budgets from now on."""
        with self._cond:
            self._live.add(guard)
            self._schedule(guard, guard.next_look(time.monotonic()))
            if self._thread is None:
                self._stopping = False
                self._thread = threading.Thread(
                    target=self._loop, name="dsh-code watchdog", daemon=True
                )
                self._thread.start()
            self._cond.notify()

    def billing(self, guard: Guard) -> None:
        """``guard``'s compute is billed from now: look at it soon."""
        guard.billing = True
        with self._cond:
            self._schedule(guard, time.monotonic())
            self._cond.notify()

    def forget(self, guard: Guard) -> None:
        """Stop looking after ``guard`` (its run settled)."""
        with self._cond:
            self._live.discard(guard)

    def stop(self) -> None:
        """End the thread (the runtime is closing); it may be started again by ``watch``."""
        with self._cond:
            thread, self._thread = self._thread, None
            self._stopping = True
            self._cond.notify()
        if thread is not None:
            thread.join()

    def _loop(self) -> None:
        while True:
            with self._cond:
                while not self._stopping:
                    while self._heap and (
                        self._heap[0][2] not in self._live
                        or self._heap[0][1] != self._heap[0][2].look_id
                    ):
                        heapq.heappop(self._heap)
                    if not self._heap:
                        self._cond.wait()
                        continue
                    due = self._heap[0][0] - time.monotonic()
                    if due <= 0:
                        break
                    self._cond.wait(due)
                if self._stopping:
                    return
                _, look_id, guard = heapq.heappop(self._heap)
            self._look(guard, look_id)

    def _look(self, guard: Guard, look_id: int) -> None:
        now = time.monotonic()
        if guard.outcome is not None:
            return self.forget(guard)
        if now >= guard.deadline:
            guard.expire("wall")
            return self.forget(guard)
        if guard.billing and guard.measure() >= guard.budget_ns:
            guard.expire("compute")
            return self.forget(guard)
        with self._cond:
            if guard in self._live and guard.look_id == look_id:
                self._schedule(guard, guard.next_look(now))
        return None
