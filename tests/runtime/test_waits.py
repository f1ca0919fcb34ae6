"""Events and timed waits on the caller's async library, asyncio or trio."""

from __future__ import annotations

import time

import anyio
import pytest

from runtime._waits import new_event, wait_event
from tests.conftest import ALL_BACKENDS

pytestmark = pytest.mark.anyio


@pytest.fixture(params=ALL_BACKENDS)
def anyio_backend(request: pytest.FixtureRequest) -> object:
    """asyncio as anyio runs it, as plain ``asyncio.run`` runs it, and trio."""
    return request.param


async def test_a_wait_ends_when_the_event_is_set() -> None:
    event = new_event()

    async def later() -> None:
        await anyio.sleep(0.01)
        event.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(later)
        assert await wait_event(event, 10.0) is True
    assert await wait_event(event) is True  # set already: at once


async def test_a_timed_wait_gives_up_and_says_so() -> None:
    event = new_event()
    started = time.monotonic()
    assert await wait_event(event, 0.05) is False
    assert time.monotonic() - started >= 0.04
    assert not event.is_set()
