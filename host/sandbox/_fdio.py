"""Async reads and writes on raw non-blocking fds, for asyncio and trio alike (via anyio)."""

from __future__ import annotations

import os

import anyio

__all__ = ("close_fd", "read_some", "write_all")


async def read_some(fd: int, size: int = 1 << 16) -> bytes:
    """Wait until ``fd`` is readable, then read up to ``size`` bytes (b"" at EOF)."""
    while True:
        try:
            return os.read(fd, size)
        except BlockingIOError:
            await anyio.wait_readable(fd)


async def write_all(fd: int, data: bytes) -> None:
    """Write all of ``data``, waiting whenever the pipe is full; raises OSError if it breaks."""
    view = memoryview(data)
    while view:
        try:
            view = view[os.write(fd, view) :]
        except BlockingIOError:
            await anyio.wait_writable(fd)


def close_fd(fd: int) -> None:
    """Close ``fd`` after telling anyio, so no waiter is left on a reused number."""
    try:
        anyio.notify_closing(fd)
    except Exception:
        pass
    try:
        os.close(fd)
    except OSError:
        pass
