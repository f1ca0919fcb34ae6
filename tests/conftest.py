"""Shared fixtures: the anyio backends every async test runs under."""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Callable
from typing import Any

import pytest
import sniffio


def _plain(callback: Callable[..., Any]) -> Callable[..., Any]:
    """``callback`` run in a context where no async library is declared."""

    def in_plain_context(*args: Any) -> Any:
        context = contextvars.copy_context()
        context.run(sniffio.current_async_library_cvar.set, None)
        return context.run(callback, *args)

    return in_plain_context


class PlainAsyncioLoop(asyncio.SelectorEventLoop):
    """An asyncio loop whose callbacks run as under plain ``asyncio.run``.

    anyio's runner (``anyio.run`` and its pytest plugin) declares "asyncio" in a context
    variable that every callback inherits; under ``asyncio.run`` nothing does, and anyio
    called from a reader callback (not from a task) fails there. Tasks keep their context.
    """

    def call_soon(  # type: ignore[override]
        self, callback: Callable[..., Any], *args: Any, context: contextvars.Context | None = None
    ) -> asyncio.Handle:
        if context is None:
            return super().call_soon(_plain(callback), *args)
        return super().call_soon(callback, *args, context=context)

    def call_soon_threadsafe(  # type: ignore[override]
        self, callback: Callable[..., Any], *args: Any, context: contextvars.Context | None = None
    ) -> asyncio.Handle:
        if context is None:
            return super().call_soon_threadsafe(_plain(callback), *args)
        return super().call_soon_threadsafe(callback, *args, context=context)

    def call_at(  # type: ignore[override]
        self,
        when: float,
        callback: Callable[..., Any],
        *args: Any,
        context: contextvars.Context | None = None,
    ) -> asyncio.TimerHandle:
        if context is None:
            return super().call_at(when, _plain(callback), *args)
        return super().call_at(when, callback, *args, context=context)

    def add_reader(self, fd: Any, callback: Callable[..., Any], *args: Any) -> None:  # type: ignore[override]
        super().add_reader(fd, _plain(callback), *args)

    def add_writer(self, fd: Any, callback: Callable[..., Any], *args: Any) -> None:  # type: ignore[override]
        super().add_writer(fd, _plain(callback), *args)


#: asyncio as anyio runs it, asyncio as plain ``asyncio.run`` runs it, and trio.
ALL_BACKENDS = [
    pytest.param("asyncio", id="asyncio"),
    pytest.param(("asyncio", {"loop_factory": PlainAsyncioLoop}), id="asyncio-plain"),
    pytest.param("trio", id="trio"),
]


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> Any:
    """Run each anyio test under asyncio and under trio."""
    return request.param
