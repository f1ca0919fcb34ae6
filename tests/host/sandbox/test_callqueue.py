"""The call queue between a run's bridge and its workers: order, wake-ups, close, cancel."""

from __future__ import annotations

from typing import Any

import anyio
import msgspec
import pytest

from host.sandbox._callqueue import CallQueue, QueuedCall

pytestmark = pytest.mark.anyio


async def _binding(args: Any) -> Any:
    return args


def _call(i: int) -> QueuedCall:
    return QueuedCall(i, f"tools.c{i}", _binding, msgspec.Raw(b"{}"))


async def test_calls_come_out_in_arrival_order_to_however_many_workers() -> None:
    queue = CallQueue()
    served: list[tuple[str, int]] = []

    async def worker(name: str) -> None:
        while (call := await queue.get()) is not None:
            served.append((name, call.id))
            await anyio.sleep(0)

    async with anyio.create_task_group() as tg:
        for name in ("a", "b", "c"):
            tg.start_soon(worker, name)
        await anyio.wait_all_tasks_blocked()
        assert queue.idle_workers == 3
        for i in range(20):
            queue.put(_call(i))
        await anyio.wait_all_tasks_blocked()
        queue.close()
    assert sorted(i for _, i in served) == list(range(20))
    assert len({name for name, _ in served}) > 1  # idle workers were woken, not just one
    firsts: dict[str, int] = {}
    for name, i in served:  # each worker takes its calls in arrival order
        assert i > firsts.get(name, -1)
        firsts[name] = i


async def test_close_wakes_idle_workers_after_the_queued_calls() -> None:
    queue = CallQueue()
    queue.put(_call(1))
    queue.close()
    assert await queue.get() == _call(1)  # queued before the close: still served
    assert await queue.get() is None


async def test_a_cancelled_worker_leaves_the_idle_list() -> None:
    queue = CallQueue()
    got: list[Any] = []
    with anyio.move_on_after(0.01):
        await queue.get()
    assert queue.idle_workers == 0

    async def worker() -> None:
        got.append(await queue.get())

    async with anyio.create_task_group() as tg:
        tg.start_soon(worker)
        await anyio.wait_all_tasks_blocked()
        queue.put(_call(7))  # woken: the cancelled waiter did not swallow the wake-up
    assert got == [_call(7)]
