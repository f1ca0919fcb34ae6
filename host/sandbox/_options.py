"""Backend settings of a run that are not per-request limits, and a session's part of it."""

from __future__ import annotations

import functools
import os
import tempfile
from collections.abc import Mapping, Sequence

import msgspec

from runtime import RunError

__all__ = (
    "MAX_HASH_SEED",
    "RunOptions",
    "SessionState",
    "check_options",
    "default_workdir_root",
    "keeps_state",
)

#: The largest hash seed (PYTHONHASHSEED) the interpreter takes.
MAX_HASH_SEED = 2**32 - 1
#: The least each count option of ``SubprocessRuntime`` may be.
_LEAST = {
    "max_concurrent_runs": 1,
    "max_frame_bytes": 4096,
    "max_file_bytes": 4096,
    "max_open_files": 16,
    "max_log_lines": 1,
    "max_call_bytes": 1,
    "max_json_values": 16,
    "prefork": 0,
    "max_processes": 4,
}

#: The failures whose state a session that keeps a failed run's names takes: the program ran
#: to its exception (or to a result that is not JSON); a killed run's child could not save one.
_KEPT_AFTER = frozenset({"exception", "invalid_completion"})


def keeps_state(session: SessionState | None, error: RunError) -> bool:
    """Whether the state a failed run's child sent becomes the session's."""
    return session is not None and session.keep_failed and error.kind in _KEPT_AFTER


def check_options(
    *,
    counts: Mapping[str, int],
    isolation: str,
    run_as_uid: int | range | None,
    preload: Sequence[str],
    hash_seed: int | None,
) -> None:
    """Raise ``ValueError`` for an option of ``SubprocessRuntime`` it cannot take."""
    for name, value in counts.items():
        least = _LEAST[name]
        if type(value) is not int or value < least:
            raise ValueError(f"{name} must be an int of at least {least}, got {value!r}")
    if isolation not in ("auto", "namespaces", "process"):
        raise ValueError(f"isolation must be 'auto', 'namespaces' or 'process', not {isolation!r}")
    if isinstance(run_as_uid, range):
        if (
            len(run_as_uid) == 0
            or run_as_uid.step != 1
            or not (run_as_uid.start > 0 and run_as_uid.stop <= 2**32 - 1)
        ):
            raise ValueError(f"run_as_uid must be a non-empty range of uids, got {run_as_uid!r}")
    elif run_as_uid is not None and (
        type(run_as_uid) is not int or not 0 <= run_as_uid < 2**32 - 1
    ):
        raise ValueError(
            f"run_as_uid must be a uid (an int from 0) or a range of them, got {run_as_uid!r}"
        )
    if isinstance(preload, str) or not all(
        isinstance(m, str) and all(p.isidentifier() for p in m.split(".")) for m in preload
    ):
        raise ValueError(f"preload must be module names (a list of str), got {preload!r}")
    if hash_seed is not None and (
        type(hash_seed) is not int or not 1 <= hash_seed <= MAX_HASH_SEED
    ):
        raise ValueError(f"hash_seed must be an int from 1 to {MAX_HASH_SEED}, got {hash_seed!r}")


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
