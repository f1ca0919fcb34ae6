"""Async reads and writes on raw non-blocking fds, for asyncio and trio alike (via anyio)."""

from __future__ import annotations

import os
import select

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


class FrameWriter:
    """Writes whole frames to a non-blocking fd, in order, without interleaving them.

    The common case (the pipe has room) is one ``os.write`` with no await at all; only a
    frame that does not fit waits, and holds the lock so no other frame cuts into it.
    """

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self._lock = anyio.Lock()

    def send_nowait(self, frame: bytes) -> bool:
        """Write a small frame now if the pipe takes it whole; False (nothing written) if not."""
        if self._lock.locked() or len(frame) > select.PIPE_BUF:
            return False  # only writes up to PIPE_BUF are atomic: never leave half a frame
        try:
            return os.write(self.fd, frame) == len(frame)
        except OSError:
            return False

    async def send(self, frame: bytes) -> None:
        """Write ``frame`` whole; raises OSError if the pipe breaks."""
        if not self._lock.locked():
            try:
                written = os.write(self.fd, frame)
            except BlockingIOError:
                written = 0
            if written == len(frame):
                return
            frame = frame[written:]
            self._lock.acquire_nowait()  # nobody else may write until this frame is out
            try:
                await write_all(self.fd, frame)
            finally:
                self._lock.release()
            return
        async with self._lock:
            await write_all(self.fd, frame)
