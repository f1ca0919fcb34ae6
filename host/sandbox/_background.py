"""Work a runtime finishes after ``run()`` returned: tracked, never raised, awaited by
``aclose()``.

A run's last steps (waiting for its killed processes to exit, freeing its fds, directory and
cgroup, asking for the next spare) need no caller: they are tasks of the event loop the run
ran on, outside the caller's task tree (asyncio: a task of the loop; trio: a system task).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

import anyio
import sniffio

__all__ = ("Background",)

_log = logging.getLogger("host.sandbox")


class Background:
    """The runtime's unfinished background work."""

    def __init__(self) -> None:
        self._pending = 0
        self._idle: anyio.Event | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    @property
    def pending(self) -> int:
        """How many pieces of work are still running."""
        return self._pending

    def spawn(self, work: Callable[[], Awaitable[None]], *, what: str) -> None:
        """Run ``work`` to its end without the caller (errors are logged, not raised)."""
        self._pending += 1
        if sniffio.current_async_library() == "trio":
            import trio

            trio.lowlevel.spawn_system_task(self._run_then_done, work, what)
            return
        task = asyncio.get_running_loop().create_task(self._run(work, what))
        self._tasks.add(task)
        # Counted off when the task ends, even if it is cancelled before it ever runs (as
        # asyncio.run does to every task when its main coroutine returns).
        task.add_done_callback(self._task_done)

    async def _run(self, work: Callable[[], Awaitable[None]], what: str) -> None:
        try:
            with anyio.CancelScope(shield=True):
                await work()
        except anyio.get_cancelled_exc_class():
            pass  # the event loop is ending: the work freed what it could on its way out
        except BaseException:  # never let it crash the event loop or a trio run
            _log.exception("dsh-code: %s failed", what)

    async def _run_then_done(self, work: Callable[[], Awaitable[None]], what: str) -> None:
        try:
            await self._run(work, what)
        finally:
            self._done()

    def _task_done(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        self._done()

    def _done(self) -> None:
        self._pending -= 1
        if self._pending == 0 and self._idle is not None:
            self._idle.set()

    async def wait(self) -> None:
        """Until every piece of work has ended."""
        while self._pending:
            self._idle = anyio.Event()
            await self._idle.wait()
