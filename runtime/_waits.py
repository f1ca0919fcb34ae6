"""Events and timed waits on whichever async library runs the caller: asyncio or trio (the
runtime's host side does not import anyio)."""

from __future__ import annotations

import asyncio
from typing import Any

__all__ = ("new_event", "wait_event")


def _on_asyncio() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def new_event() -> Any:
    """An event of the running library (``set()``, ``is_set()``, ``await wait()``)."""
    if _on_asyncio():
        return asyncio.Event()
    import trio

    return trio.Event()


async def wait_event(event: Any, seconds: float | None = None) -> bool:
    """Wait until ``event`` is set, at most ``seconds`` (None: no limit); whether it is."""
    if seconds is None:
        await event.wait()
        return True
    if isinstance(event, asyncio.Event):
        try:
            await asyncio.wait_for(event.wait(), seconds)
        except TimeoutError:
            pass
        return event.is_set()
    import trio

    with trio.move_on_after(seconds):
        await event.wait()
    return bool(event.is_set())
