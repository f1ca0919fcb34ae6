"""Background work: tracked until it ends, however it ends, and never raised."""

from __future__ import annotations

import asyncio

import anyio
import pytest

from host.sandbox._background import Background


def test_work_cancelled_before_it_ever_ran_is_counted_off() -> None:
    # What asyncio.run does to every task still pending when its main coroutine returns.
    ran: list[str] = []

    async def work() -> None:
        ran.append("work")

    async def main() -> None:
        background = Background()
        background.spawn(work, what="a test")
        for task in list(background._tasks):
            task.cancel()  # before its first step
        with anyio.fail_after(5):
            await background.wait()
        assert background.pending == 0

    asyncio.run(main())
    assert ran == []


@pytest.mark.anyio
async def test_a_failure_is_logged_not_raised(caplog: pytest.LogCaptureFixture) -> None:
    async def work() -> None:
        raise RuntimeError("it broke")

    background = Background()
    background.spawn(work, what="breaking on purpose")
    with anyio.fail_after(5):
        await background.wait()
    assert "breaking on purpose failed" in caplog.text
    assert background.pending == 0


@pytest.mark.anyio
async def test_work_outlives_a_cancelled_caller() -> None:
    done = anyio.Event()
    background = Background()

    async def work() -> None:
        await anyio.sleep(0.05)
        done.set()

    with anyio.CancelScope() as scope:
        background.spawn(work, what="a test")
        scope.cancel()
        await anyio.sleep(0)
    with anyio.fail_after(5):
        await background.wait()
    assert done.is_set()
