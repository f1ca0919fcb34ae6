"""Stdio for ``dsh-code mcp``: lines read from a descriptor without a thread, writes in one.

The SDK's own stdin reader blocks a worker thread in ``readline``, which no cancellation
can end (Ctrl-C then waits for the next line or EOF). ``FdLines`` waits for readability on
the event loop instead and reads what is there; a descriptor the loop cannot watch (a
regular file) is read in a thread that a cancellation abandons.
"""

from __future__ import annotations

import os
from typing import Final

import anyio

__all__ = ("FdLines", "FdWriter")

_CHUNK: Final = 64 * 1024


class FdLines:
    """``async for line in FdLines(fd)``: text lines (with their newline) until EOF."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self._buffer = bytearray()
        self._eof = False
        self._pollable = True

    def __aiter__(self) -> FdLines:
        return self

    async def _read(self) -> bytes:
        if self._pollable:
            try:
                await anyio.wait_readable(self.fd)
            except (OSError, ValueError, NotImplementedError):
                self._pollable = False  # a regular file: epoll refuses it
            else:
                try:
                    return os.read(self.fd, _CHUNK)
                except BlockingIOError:
                    return await self._read()
        return await anyio.to_thread.run_sync(os.read, self.fd, _CHUNK, abandon_on_cancel=True)

    async def __anext__(self) -> str:
        while True:
            end = self._buffer.find(b"\n")
            if end >= 0:
                line = bytes(self._buffer[: end + 1])
                del self._buffer[: end + 1]
                return line.decode("utf-8", "replace")
            if self._eof:
                if self._buffer:
                    line = bytes(self._buffer)
                    self._buffer.clear()
                    return line.decode("utf-8", "replace")
                raise StopAsyncIteration
            try:
                chunk = await self._read()
            except OSError:
                chunk = b""
            if chunk:
                self._buffer += chunk
            else:
                self._eof = True


class FdWriter:
    """``await write(text)``, ``await flush()`` on a descriptor (the write in a worker thread)."""

    def __init__(self, fd: int) -> None:
        self.fd = fd

    async def write(self, text: str) -> None:
        """Write all of ``text`` (UTF-8)."""
        data = text.encode("utf-8")

        def write_all() -> None:
            view = memoryview(data)
            while view:
                view = view[os.write(self.fd, view) :]

        await anyio.to_thread.run_sync(write_all, abandon_on_cancel=True)

    async def flush(self) -> None:
        """Nothing is buffered."""
