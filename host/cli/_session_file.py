"""``--session FILE``: a session's state kept in a file between invocations (and the same
safe reading and writing for ``--journal FILE``: ``what`` names the file in messages).

The file holds the opaque blob a session's last successful run left; this process reads
and writes its bytes and never unpickles them (only a run's child loads a state). It is
read without following a symbolic link (one at the path is a usage error, as is a
directory or anything but a regular file), and written atomically: a new file, mode 0600,
made next to it and renamed over it, so a reader sees the old state or the new one,
never half of one, and a link planted at the path is replaced, never written through.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import tempfile
from pathlib import Path
from typing import Final

__all__ = ("SessionFileError", "check_session_file", "read_session_file", "write_session_file")

_READ: Final = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_CHUNK: Final = 1 << 20


class SessionFileError(Exception):
    """The session file cannot be used at the path given (a usage error before a run; after
    one, the reason the state could not be saved)."""


def check_session_file(path: Path, what: str = "session file") -> None:
    """Fail now if the state could not be saved at ``path`` later (its folder must exist and
    be writable; the path must not be a symbolic link or a directory)."""
    folder = path.parent
    if not folder.is_dir():
        raise SessionFileError(f"the {what}'s folder {folder} does not exist")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise SessionFileError(f"cannot write the {what} {path}: its folder is read-only")
    with contextlib.suppress(FileNotFoundError):
        _check_kind(path, os.lstat(path).st_mode, what)


def _check_kind(path: Path, mode: int, what: str) -> None:
    if stat.S_ISLNK(mode):
        raise SessionFileError(f"the {what} {path} is a symbolic link; refusing to follow it")
    if stat.S_ISDIR(mode):
        raise SessionFileError(f"the {what} {path} is a directory; give a file name")
    if not stat.S_ISREG(mode):
        raise SessionFileError(f"the {what} {path} is not a regular file")


def read_session_file(path: Path, max_bytes: int, what: str = "session file") -> bytes | None:
    """The state in ``path`` (None when there is no file yet: a new session). A file over
    ``max_bytes`` gives its first ``max_bytes + 1`` bytes (the caller fails the run)."""
    check_session_file(path, what)
    try:
        fd = os.open(path, _READ)
    except FileNotFoundError:
        return None
    except OSError as exc:
        if exc.errno == errno.ELOOP:  # a link planted since the check
            raise SessionFileError(
                f"the {what} {path} is a symbolic link; refusing to follow it"
            ) from None
        raise SessionFileError(f"cannot read the {what} {path}: {exc.strerror or exc}") from None
    try:
        _check_kind(path, os.fstat(fd).st_mode, what)
        chunks: list[bytes] = []
        size = 0
        while size <= max_bytes:
            chunk = os.read(fd, min(_CHUNK, max_bytes + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        return b"".join(chunks)
    except OSError as exc:
        raise SessionFileError(f"cannot read the {what} {path}: {exc.strerror or exc}") from None
    finally:
        os.close(fd)


def write_session_file(
    path: Path, state: bytes, what: str = "session file", saving: str = "save the session to"
) -> None:
    """Replace ``path`` with a new file holding ``state`` (mode 0600, atomically)."""
    try:
        fd, temporary = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as exc:
        raise SessionFileError(f"cannot {saving} {path}: {exc.strerror or exc}") from None
    try:
        with os.fdopen(fd, "wb") as out:  # mkstemp: O_EXCL, O_NOFOLLOW, mode 0600
            out.write(state)
            out.flush()
            os.fsync(out.fileno())
        with contextlib.suppress(FileNotFoundError):
            if stat.S_ISDIR(os.lstat(path).st_mode):  # rename would fail less clearly
                raise SessionFileError(f"the {what} {path} is a directory; give a file name")
        os.replace(temporary, path)  # a symbolic link at path is replaced, not followed
    except BaseException as exc:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        if isinstance(exc, OSError):
            raise SessionFileError(f"cannot {saving} {path}: {exc.strerror or exc}") from None
        raise
    _sync_folder(path.parent)


def _sync_folder(folder: Path) -> None:
    """The rename survives a crash once the folder is synced (best effort)."""
    with contextlib.suppress(OSError):
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
