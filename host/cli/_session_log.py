"""The session log: one JSON object per line (zstd-compressed when the name ends in .zst).

The file is created 0600 and never through a symbolic link: an existing regular file is
replaced by a new one (a hard link planted at the path keeps its content), a symbolic link
or a directory is refused, and a device (``/dev/null``) is written as it is. A write error
later does not end the run: the log stops, and ``error`` says why.
"""

from __future__ import annotations

import contextlib
import os
import stat
import time
from pathlib import Path
from typing import Any, Final

import msgspec

__all__ = ("LogFileError", "SessionLog")

_CREATE: Final = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


class LogFileError(Exception):
    """The session log cannot be created at the path given (a usage error)."""


def _default(value: Any) -> Any:
    return repr(value)


def _open(path: Path) -> int:
    try:
        return os.open(path, _CREATE, 0o600)
    except FileExistsError:
        pass
    info = os.lstat(path)
    if stat.S_ISLNK(info.st_mode):
        raise LogFileError(f"the log {path} is a symbolic link; refusing to follow it")
    if stat.S_ISDIR(info.st_mode):
        raise LogFileError(f"the log {path} is a directory; give a file name")
    if stat.S_ISREG(info.st_mode):
        os.unlink(path)
        return os.open(path, _CREATE, 0o600)  # O_EXCL again: a link planted meanwhile fails
    return os.open(path, os.O_WRONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)


class SessionLog:
    """Appends events ``{"event", "time", ...}``; enough to reconstruct a run."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.error: str | None = None
        """Why the log stopped (a write or close error), or None."""
        try:
            fd = _open(path)
        except LogFileError:
            raise
        except OSError as exc:
            raise LogFileError(f"cannot write the log {path}: {exc.strerror or exc}") from None
        self._raw = os.fdopen(fd, "wb")
        self._out: Any = self._raw
        self._encoder = msgspec.json.Encoder(enc_hook=_default)
        if path.name.endswith(".zst"):
            import zstandard

            self._out = zstandard.ZstdCompressor().stream_writer(self._raw, closefd=False)

    def _failed(self, exc: OSError) -> None:
        if self.error is None:
            self.error = f"cannot write the log {self.path}: {exc.strerror or exc}"

    def write(self, event: str, **fields: Any) -> None:
        """Append one event (nothing once a write has failed)."""
        if self.error is not None:
            return
        record = {"event": event, "time": round(time.time(), 6), **fields}
        try:
            self._out.write(self._encoder.encode(record) + b"\n")
            if self._out is self._raw:
                self._raw.flush()  # readable as it happens (tail -f), and kept if we are killed
        except OSError as exc:
            self._failed(exc)

    def close(self) -> str | None:
        """Flush and close (ends the zstd frame); the error that stopped the log, if any."""
        try:
            if self._out is not self._raw:
                self._out.close()
            self._raw.flush()
        except OSError as exc:
            self._failed(exc)
        finally:
            with contextlib.suppress(OSError):
                self._raw.close()
        return self.error
