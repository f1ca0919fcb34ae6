"""Budgets that nothing a program does can starve: a thread per runtime enforces every run's
wall and compute budget, killing the run itself; the event loop only reports.

A run's outcome is claimed once, by whoever is first: the run's own handling of the child's
report on the event loop, or the watchdog when a budget runs out (it kills the run's
processes right after its claim, so the loop learns of it when the child dies, however busy
the loop is).
"""

from __future__ import annotations

import collections
import contextlib
import heapq
import itertools
import logging
import math
import os
import select
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
_FD_SETSIZE = 1024


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
    """The thread that looks after every guard of a runtime.

    The event loop never waits for it: its requests go in a queue (appends are atomic) and
    wake the thread through an eventfd, so a watchdog thread holding the GIL or its own
    state never stalls the loop; a request that is not due before the thread's next look
    does not wake it at all. Only the thread touches the schedule.
    """

    def __init__(self) -> None:
        self._inbox: collections.deque[tuple[float | None, Guard]] = collections.deque()
        self._heap: list[tuple[float, int, Guard]] = []  # (when, look id, guard)
        self._live: set[Guard] = set()
        self._order = itertools.count()
        self._thread: threading.Thread | None = None
        self._wake = -1
        self._stopping = False
        self._next_wake = 0.0  # when the thread looks next of its own accord (it sets it)

    def _schedule(self, guard: Guard, when: float) -> None:
        guard.look_id = next(self._order)
        heapq.heappush(self._heap, (when, guard.look_id, guard))

    def _ask(self, when: float | None, guard: Guard) -> None:
        """Queue a request for the thread (look at ``guard`` at ``when``, or forget it: None)
        and wake it if the look is due before the thread would wake anyway."""
        self._inbox.append((when, guard))  # first: the thread reads its inbox after _next_wake
        if when is not None and when < self._next_wake and self._wake >= 0:
            os.eventfd_write(self._wake, 1)

    def watch(self, guard: Guard) -> None:
        """Enforce ``guard``'s budgets from now on."""
        if self._thread is None:
            self._stopping = False
            self._wake = os.eventfd(0, os.EFD_CLOEXEC | os.EFD_NONBLOCK)
            self._thread = threading.Thread(
                target=self._loop, args=(self._wake,), name="dsh-code watchdog", daemon=True
            )
            self._thread.start()
        self._ask(guard.next_look(time.monotonic()), guard)

    def billing(self, guard: Guard) -> None:
        """``guard``'s compute is billed from now: look at it when the budget could first
        have run out (every CPU busy for the run). The template watches the run from the
        same moment; this is the backstop, and a run that ends before then costs no look."""
        guard.billing = True
        when = time.monotonic() + max(guard.budget_ns / 1e9 / _CPUS, _POLL_MIN_S)
        self._ask(min(when, guard.deadline), guard)

    def forget(self, guard: Guard) -> None:
        """Stop looking after ``guard`` (its run settled)."""
        self._ask(None, guard)

    def stop(self) -> None:
        """End the thread (the runtime is closing); it may be started again by ``watch``."""
        thread, self._thread = self._thread, None
        if thread is None:
            return
        self._stopping = True
        os.eventfd_write(self._wake, 1)
        thread.join()
        os.close(self._wake)
        self._wake = -1

    def _take_requests(self) -> None:
        while self._inbox:
            when, guard = self._inbox.popleft()
            if when is None:
                self._live.discard(guard)
            elif guard.outcome is None:
                self._live.add(guard)
                self._schedule(guard, when)

    def _loop(self, wake: int) -> None:
        poller = select.poll()
        poller.register(wake, select.POLLIN)
        while not self._stopping:
            self._take_requests()
            while self._heap and (
                self._heap[0][2] not in self._live or self._heap[0][1] != self._heap[0][2].look_id
            ):
                heapq.heappop(self._heap)
            due = self._heap[0][0] - time.monotonic() if self._heap else None
            if due is not None and due <= 0:
                _, look_id, guard = heapq.heappop(self._heap)
                self._look(guard, look_id)
                continue
            self._next_wake = self._heap[0][0] if self._heap else math.inf
            if self._inbox:  # asked while the time was worked out: not woken for it
                continue
            if _sleep(poller, wake, due):
                with contextlib.suppress(BlockingIOError):
                    os.eventfd_read(wake)

    def _look(self, guard: Guard, look_id: int) -> None:
        now = time.monotonic()
        if guard.outcome is not None:
            self._live.discard(guard)
            return
        if now >= guard.deadline:
            guard.expire("wall")
            self._live.discard(guard)
            return
        if guard.billing and guard.measure() >= guard.budget_ns:
            guard.expire("compute")
            self._live.discard(guard)
            return
        if guard in self._live and guard.look_id == look_id:
            self._schedule(guard, guard.next_look(now))


def _sleep(poller: select.poll, wake: int, due: float | None) -> bool:
    """Until ``due`` seconds pass (None: for ever) or ``wake`` is poked; True if poked.
    select keeps the microseconds a budget's look needs (poll rounds up to a millisecond)."""
    if due is not None and wake < _FD_SETSIZE:
        return bool(select.select([wake], [], [], due)[0])
    return bool(poller.poll(None if due is None else math.ceil(due * 1000)))
