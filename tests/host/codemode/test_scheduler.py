"""The sub-call scheduler: parallel calls overlap up to the bound, exclusive calls are barriers."""

from __future__ import annotations

import anyio
import pytest

from host.codemode import SubCallScheduler

pytestmark = pytest.mark.anyio


async def _trace(kinds: str, max_parallel: int) -> list[tuple[str, int, str]]:
    """Start calls in order (p = parallel, x = exclusive); record start and end events."""
    scheduler = SubCallScheduler(max_parallel)
    events: list[tuple[str, int, str]] = []

    async def call(i: int, parallel: bool) -> None:
        async with scheduler.slot(parallel):
            events.append(("start", i, "p" if parallel else "x"))
            await anyio.sleep(0.01)
            events.append(("end", i, "p" if parallel else "x"))

    async with anyio.create_task_group() as tg:
        for i, kind in enumerate(kinds):
            tg.start_soon(call, i, kind == "p")
            await anyio.sleep(0)  # arrival order = start order
    return events


async def test_parallel_calls_overlap_up_to_the_bound() -> None:
    events = await _trace("pppppp", 3)
    running = peak = 0
    for kind, _, _ in events:
        running += 1 if kind == "start" else -1
        peak = max(peak, running)
    assert peak == 3


async def test_an_exclusive_call_waits_for_earlier_calls_and_blocks_later_ones() -> None:
    events = await _trace("ppxpp", 10)
    x_start = events.index(("start", 2, "x"))
    x_end = events.index(("end", 2, "x"))
    assert events.index(("end", 0, "p")) < x_start
    assert events.index(("end", 1, "p")) < x_start
    assert events.index(("start", 3, "p")) > x_end
    assert events.index(("start", 4, "p")) > x_end


async def test_exclusive_calls_run_alone_in_arrival_order() -> None:
    events = await _trace("xxx", 10)
    assert [e for e in events if e[0] == "start"] == [("start", i, "x") for i in range(3)]
    for i in range(2):
        assert events.index(("end", i, "x")) < events.index(("start", i + 1, "x"))


async def test_one_means_serial() -> None:
    events = await _trace("pppp", 1)
    assert [e[0] for e in events] == ["start", "end"] * 4


async def test_a_cancelled_waiter_leaves_the_queue() -> None:
    scheduler = SubCallScheduler(1)
    order: list[str] = []

    taken, release = anyio.Event(), anyio.Event()

    async def hold() -> None:
        async with scheduler.slot(False):
            taken.set()
            await release.wait()  # held until the waiter below has given up (no timing race)
            order.append("first")

    async with anyio.create_task_group() as tg:
        tg.start_soon(hold)
        await taken.wait()
        with anyio.move_on_after(0.01):
            async with scheduler.slot(True):
                order.append("never")
        release.set()
        async with scheduler.slot(True):
            order.append("after")
    assert order == ["first", "after"]


def test_max_parallel_must_be_positive() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        SubCallScheduler(0)
