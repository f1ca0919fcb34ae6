"""Raw-fd helpers: whole frames never interleave."""

from __future__ import annotations

import os

import anyio
import pytest

from host.sandbox._fdio import FrameWriter, read_some

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
