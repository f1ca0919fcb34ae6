"""Signals of the ``dsh-code`` command: SIGINT, SIGTERM and SIGHUP end it cleanly, twice at once.

Stdlib only: it is installed before anything heavy is imported, so a signal during
start-up is a message and an exit code, never a traceback. Until the event loop takes
over (``Stopper.watch``) a signal raises ``Interrupted`` where the command is; inside the
loop it aborts the run (or stops the server) and the command cleans up, within a bound.
Once the outcome is decided (``Stopper.settle``) a signal is only recorded, so the result
is written whole and the exit code is the result's. A second signal exits at once, killing
every process the command started.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from types import FrameType
from typing import Final, NoReturn

__all__ = (
    "EXIT_SIGNAL_BASE",
    "SIGNALS",
    "STOPPER",
    "Interrupted",
    "Stopper",
    "abort_notice",
    "current_stopper",
    "exit_code_for",
    "install",
    "kill_descendants",
    "signal_name",
)

SIGNALS: Final = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
#: A command ended by signal N exits 128 + N, as a shell reports it (130, 143, 129).
EXIT_SIGNAL_BASE: Final = 128


class Interrupted(BaseException):
    """A signal arrived outside the event loop (start-up, shut-down): the command ends."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal_name(signum))
        self.signum = signum


def signal_name(signum: int) -> str:
    """``SIGINT``, ``SIGTERM``, ``SIGHUP``."""
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


def abort_notice(signum: int) -> str:
    """What a first signal says: the run is being aborted, and how to exit at once (Ctrl-C
    only for SIGINT: a SIGTERM or SIGHUP came from elsewhere, not from the keyboard)."""
    again = "Ctrl-C again" if signum == signal.SIGINT else f"another {signal_name(signum)}"
    return f"dsh-code: {signal_name(signum)}: aborting the run ({again} exits at once)"


def exit_code_for(signum: int) -> int:
    """The exit code of a command ended by ``signum``."""
    return EXIT_SIGNAL_BASE + signum


def kill_descendants() -> None:
    """SIGKILL every process this one started (the runtime's template, MCP servers, theirs)."""
    try:
        import psutil

        children = psutil.Process().children(recursive=True)
    except Exception:  # the last resort must not fail: nothing more can be done
        return
    for child in children:
        with contextlib.suppress(Exception):
            child.kill()


class Stopper:
    """Where a signal goes: ``Interrupted`` outside the loop, an abort inside, ``_exit`` twice."""

    def __init__(self, grace_s: float = 10.0) -> None:
        self.grace_s = grace_s
        """How long the clean-up after a first signal may take before the command exits anyway."""
        self.received: list[int] = []
        self.in_loop = False
        self.installed = False
        """Whether ``install`` made this the process's handler (``dsh-code`` itself)."""
        self.on_hard_exit: Callable[[int], None] | None = None
        """Called with the signal before a hard exit (e.g. to write the ``--json`` object)."""
        self.settled = False
        """The outcome is decided: what is left is writing it and exiting."""

    def handle(self, signum: int, _frame: FrameType | None = None) -> None:
        """The synchronous handler: record, then raise outside the loop or exit on a second."""
        self.received.append(signum)
        if len(self.received) > 1:
            self.hard_exit(signum)
        if not self.in_loop and not self.settled:
            raise Interrupted(signum)

    def settle(self) -> None:
        """From now on a first signal is only recorded: an exception raised into the write of
        the result would cut it (a ``--json`` object half written), and it is decided."""
        self.settled = True

    def hard_exit(self, signum: int, why: str | None = None) -> NoReturn:
        """A second signal (or ``why``): kill what we started, say so, exit at once."""
        kill_descendants()
        with contextlib.suppress(BaseException):
            if self.on_hard_exit is not None:
                self.on_hard_exit(signum)
        with contextlib.suppress(BaseException):
            why = why or f"{signal_name(signum)} again"
            sys.stderr.write(f"\ndsh-code: {why}: exiting at once\n")
            sys.stderr.flush()
        os._exit(exit_code_for(signum))

    def reinstall(self) -> None:
        """Put the synchronous handler back (the event loop's receiver restores the defaults)."""
        if not self.installed:
            return  # not the command's process (a test runner): leave its handlers alone
        for sig in SIGNALS:
            signal.signal(sig, self.handle)

    @property
    def first(self) -> int | None:
        """The first signal received, if any."""
        return self.received[0] if self.received else None

    @contextlib.contextmanager
    def event_loop(self) -> Iterator[None]:
        """Around ``anyio.run``: signals are recorded (``watch`` acts on them), never raised."""
        self.in_loop = True
        try:
            yield
        finally:
            self.in_loop = False
            self.reinstall()

    @contextlib.asynccontextmanager
    async def watch(self, on_signal: Callable[[int], None]) -> AsyncIterator[None]:
        """``on_signal(signum)`` on the first signal; a hard exit on the next or past the grace."""
        import anyio

        own = anyio.CancelScope(shield=True)  # the caller cancelling everything must not stop it

        async def receive(receiver: AsyncIterator[int]) -> None:
            with own:
                async for signum in receiver:
                    self.received.append(signum)
                    if len(self.received) > 1:
                        self.hard_exit(signum)
                    stop(signum)

        timers: list[threading.Timer] = []

        def stop(signum: int) -> None:
            # A thread, not a task: the clean-up bound holds even if the loop is stuck or
            # the caller's cancellation reaches every task.
            late = f"the clean-up took longer than {self.grace_s:g} s"
            timer = threading.Timer(self.grace_s, self.hard_exit, (signum, late))
            timer.daemon = True
            timer.start()
            timers.append(timer)
            on_signal(signum)

        try:
            with anyio.open_signal_receiver(*SIGNALS) as receiver:
                async with anyio.create_task_group() as group:
                    group.start_soon(receive, receiver)
                    if self.received:  # arrived while the loop was starting
                        stop(self.received[0])
                    try:
                        yield
                    finally:
                        own.cancel()
        finally:
            for timer in timers:
                timer.cancel()
            self.reinstall()  # the loop's receiver leaves the default handlers behind


#: Where signals go; ``host.cli.main`` installs its own before the commands run.
STOPPER: list[Stopper] = []


def current_stopper() -> Stopper:
    """The command's stopper (a new one when the commands run without ``host.cli.main``)."""
    if not STOPPER:
        STOPPER.append(Stopper())
    return STOPPER[0]


def install() -> Stopper:
    """Install the synchronous handlers for SIGINT, SIGTERM and SIGHUP; return their state."""
    stopper = Stopper()
    stopper.installed = True
    stopper.reinstall()
    return stopper
