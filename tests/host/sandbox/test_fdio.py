"""Raw-fd helpers: whole frames never interleave, and Slots is a fair counting semaphore."""

from __future__ import annotations

import os

import anyio
import pytest

from host.sandbox._fdio import FrameWriter, Slots, read_some

pytestmark = pytest.mark.anyio


async def test_frames_larger_than_the_pipe_never_interleave() -> None:
    r, w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
    writer = FrameWriter(w)
    frames = [bytes([65 + i]) * 200_000 for i in range(4)]  # each bigger than a pipe buffer
    received = bytearray()

    async def reader() -> None:
        while len(received) < sum(map(len, frames)):
            received.extend(await read_some(r, 1 << 16))

    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(reader)
            for frame in frames:
                tg.start_soon(writer.send, frame)
    finally:
        os.close(r)
        os.close(w)
    runs: list[list[int]] = []
    for byte in received:
        if not runs or runs[-1][0] != byte:
            runs.append([byte, 0])
        runs[-1][1] += 1
    assert sorted(count for _, count in runs) == [200_000] * 4  # four unbroken frames


async def test_slots_bound_holders_and_serve_waiters_in_order() -> None:
    slots = Slots(2)
    arrivals: list[int] = []
    order: list[int] = []
    active = peak = 0

    async def job(i: int) -> None:
        nonlocal active, peak
        arrivals.append(i)
        await slots.acquire()
        try:
            order.append(i)
            active += 1
            peak = max(peak, active)
            await anyio.sleep(0.02 * (i + 1))  # releases far apart: one grant at a time
            active -= 1
        finally:
            slots.release()

    async with anyio.create_task_group() as tg:
        for i in range(6):
            tg.start_soon(job, i)
            await anyio.sleep(0)
    assert peak == 2
    assert order == arrivals  # granted in the order they asked
    assert slots.free == 2


async def test_a_cancelled_waiter_gives_back_nothing_it_did_not_take() -> None:
    slots = Slots(1)
    await slots.acquire()
    with anyio.move_on_after(0.01):
        await slots.acquire()
    slots.release()
    assert slots.free == 1
    await slots.acquire()  # still usable
    slots.release()
