"""Backend settings of a run that are not per-request limits, and a session's part of it."""

from __future__ import annotations

import functools
import os
import tempfile

import msgspec

from runtime import RunError

__all__ = ("RunOptions", "SessionState", "default_workdir_root", "keeps_state")

#: The failures whose state a session that keeps a failed run's names takes: the program ran
#: to its exception (or to a result that is not JSON); a killed run's child could not save one.
_KEPT_AFTER = frozenset({"exception", "invalid_completion"})


def keeps_state(session: SessionState | None, error: RunError) -> bool:
    """Whether the state a failed run's child sent becomes the session's."""
    return session is not None and session.keep_failed and error.kind in _KEPT_AFTER


@functools.cache
def default_workdir_root() -> str:
    """/dev/shm when writable (tmpfs: a run's mkdir + rmdir cost ~30 µs, not ~2 ms), else TMPDIR.
    Looked up once, when this module is imported: a runtime made on an event loop stats
    nothing there."""
    shm = "/dev/shm"
    if os.path.isdir(shm) and os.access(shm, os.W_OK | os.X_OK):
        return shm
    return tempfile.gettempdir()


default_workdir_root()


class SessionState(msgspec.Struct, kw_only=True):
    """What a session run takes in (the blob to restore) and is held to (``max_bytes``)."""

    blob: bytes
    max_bytes: int
    keep_failed: bool = False
    """Also take the state of a run that raised (or returned a value that is not JSON)."""


class RunOptions(msgspec.Struct, frozen=True, kw_only=True):
    """Backend settings that are not per-request limits."""

    workdir_root: str
    max_frame_bytes: int = 64 * 1024 * 1024 + 4096
    max_file_bytes: int = 256 * 1024 * 1024
    max_open_files: int = 256
    max_log_lines: int = 1_000_000
    max_call_bytes: int = 64 * 1024 * 1024
    max_json_values: int = 1_000_000
    max_calls_in_flight: int = 10_000
    settle_timeout: float = 5.0
