"""Shared fixtures: the anyio backends every async test runs under; the test matrix."""

from __future__ import annotations

import asyncio
import contextvars
import os
import zlib
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


#: ``DSH_TEST_MATRIX=full`` runs every test under every event loop and every isolation level.
#: By default (``scripts/test``, CI) a test parametrized by both runs under each event loop
#: once, at one isolation level, alternating with the loop and from one test to the next, so
#: every pair is still run by about half the tests: the whole matrix took CI past its time.
MATRIX_ENV = "DSH_TEST_MATRIX"


def half_of_the_matrix(item: pytest.Item) -> bool:
    """Whether ``item`` is run when the matrix is halved."""
    if not isinstance(item, pytest.Function) or not hasattr(item, "callspec"):
        return True
    indices: dict[str, int] = item.callspec.indices
    if not {"anyio_backend", "isolation"} <= indices.keys():
        return True
    rest = "-".join(
        f"{k}={v}" for k, v in sorted(indices.items()) if k not in ("anyio_backend", "isolation")
    )
    turn = zlib.crc32(f"{item.path.name}::{item.originalname}[{rest}]".encode())
    return (indices["anyio_backend"] + indices["isolation"] + turn) % 2 == 0


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Halve the event loop by isolation level matrix unless the full one is asked for."""
    if os.environ.get(MATRIX_ENV) == "full":
        return
    kept = [item for item in items if half_of_the_matrix(item)]
    if len(kept) < len(items):
        config.hook.pytest_deselected(items=[i for i in items if not half_of_the_matrix(i)])
        items[:] = kept
