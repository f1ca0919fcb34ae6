"""The runtime adapters use by default: one ``SubprocessRuntime`` per event loop, closed with it.

Frameworks make providers, executors and toolsets freely (FastMCP caches thousands) and
rarely close them, so none of them owns processes: they share a runtime per event loop
and settings. Its template starts once, in a task of its own, so a caller cancelled while
it waits (a short ``wait_for``) does not throw the start away; it is closed when the loop
shuts down (``asyncio.run`` closing its async generators; trio ending its system tasks).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

import anyio
import anyio.lowlevel
import sniffio

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from host.sandbox import SubprocessRuntime

__all__ = ("shared_runtime",)

_log = logging.getLogger("host.adapters")


class _Shared:
    """A loop's runtime for one set of settings, and what keeps it until the loop ends."""

    def __init__(self, runtime: SubprocessRuntime) -> None:
        self.runtime = runtime
        self.ready = anyio.Event()
        self.closed = False
        self.keeper: Any = None  # asyncio: the async generator whose close closes the runtime
        self.starting: Any = None  # asyncio: the start's task (the loop keeps only weak ones)

    async def start(self) -> None:
        """Start the template, shielded: a start is paid once, whoever is waiting for it."""
        try:
            with anyio.CancelScope(shield=True):
                await self.runtime.start()
        except Exception as exc:  # the next run tries again and reports it
            _log.debug("dsh-code: the shared runtime did not start: %s", exc)
        finally:
            self.ready.set()

    async def close(self) -> None:
        self.closed = True
        with anyio.CancelScope(shield=True):
            await self.runtime.aclose()


_SHARED: anyio.lowlevel.RunVar[dict[tuple[Any, ...], _Shared]] = anyio.lowlevel.RunVar(
    "dsh_code_shared_runtimes"
)


async def _closes_with_the_loop(shared: _Shared) -> AsyncIterator[None]:
    """An async generator the loop closes at shutdown (``shutdown_asyncgens``)."""
    try:
        yield
    finally:
        await shared.close()


async def _trio_keeper(shared: _Shared) -> None:
    """A trio system task: starts the runtime, closes it when the run ends."""
    try:
        await shared.start()
        await anyio.sleep_forever()
    finally:
        await shared.close()


async def shared_runtime(**settings: Any) -> SubprocessRuntime:
    """This event loop's ``SubprocessRuntime`` for ``settings`` (made and started once)."""
    try:
        table = _SHARED.get()
    except LookupError:
        table = {}
        _SHARED.set(table)
    key = tuple(sorted(settings.items()))
    shared = table.get(key)
    if shared is None or shared.closed:
        from host.sandbox import SubprocessRuntime

        shared = _Shared(SubprocessRuntime(**settings))
        table[key] = shared
        if sniffio.current_async_library() == "trio":
            import trio

            trio.lowlevel.spawn_system_task(_trio_keeper, shared)
        else:
            import asyncio

            shared.keeper = _closes_with_the_loop(shared)
            await shared.keeper.__anext__()  # now the loop knows it, and closes it at shutdown
            shared.starting = asyncio.get_running_loop().create_task(shared.start())
    await shared.ready.wait()
    return shared.runtime
