"""``dsh-code run --journal FILE``: a run's journal and settings, kept to resume it later.

The file is JSON: ``{"format": "dsh-code-run", "version": 1, "settings": {...},
"journal": {...}}``, where ``settings`` are the ``run`` flags the resume needs again (the
bindings files, MCP servers, limits, policy, call style, isolation, session file; never
``--yes``/``--no``, which a resume gives itself) and ``journal`` the runtime's journal, byte
for byte (its checksum covers it). It is written as ``--session`` files are (mode 0600,
atomically, never through a symbolic link) and read without following one.
"""

from __future__ import annotations

from pathlib import Path
from typing import Final

import msgspec

from host.cli._session_file import SessionFileError, read_session_file, write_session_file
from runtime import Journal, JournalError

__all__ = (
    "FILE_FORMAT",
    "JournalFileError",
    "RunSettings",
    "read_journal_file",
    "write_journal_file",
)

FILE_FORMAT: Final = "dsh-code-run"
_VERSION: Final = 1
_WHAT: Final = "journal file"
#: The largest file ``resume`` reads: a journal at its default bound, and the program.
MAX_FILE_BYTES: Final = 256 * 1024 * 1024


class JournalFileError(Exception):
    """A journal file that cannot be written, read or resumed (a usage error)."""


class RunSettings(msgspec.Struct, frozen=True, kw_only=True):
    """The ``run`` flags a resume uses again (paths made absolute)."""

    bindings: list[str]
    mcp: list[str]
    mcp_config: str | None
    mcp_timeout_ms: int
    compute_ms: int
    wall_ms: int
    max_output_bytes: int
    max_heap_mb: int
    max_parallel_sub_calls: int
    max_tool_calls: int
    policy: str
    call_style: str
    isolation: str
    max_processes: int
    no_cgroups: bool
    preload: list[str]
    ray: str | None
    session: str | None
    max_state_bytes: int


class _File(msgspec.Struct, frozen=True, kw_only=True):
    format: str
    version: int
    settings: RunSettings
    journal: msgspec.Raw


def check_journal_file(path: Path) -> None:
    """Fail now (``JournalFileError``) if the journal could not be written at ``path``."""
    from host.cli._session_file import check_session_file

    try:
        check_session_file(path, _WHAT)
    except SessionFileError as exc:
        raise JournalFileError(str(exc)) from None


def write_journal_file(path: Path, settings: RunSettings, journal: Journal) -> None:
    """Replace ``path`` with the run's settings and journal (mode 0600, atomically)."""
    data = msgspec.json.encode(
        _File(
            format=FILE_FORMAT,
            version=_VERSION,
            settings=settings,
            journal=msgspec.Raw(journal.dumps()),
        )
    )
    try:
        write_session_file(path, data + b"\n", _WHAT, "write the journal to")
    except SessionFileError as exc:
        raise JournalFileError(str(exc)) from None


def read_journal_file(path: Path) -> tuple[RunSettings, Journal]:
    """The settings and journal in ``path``; ``JournalFileError`` says what is wrong."""
    try:
        data = read_session_file(path, MAX_FILE_BYTES, _WHAT)
    except SessionFileError as exc:
        raise JournalFileError(str(exc)) from None
    if data is None:
        raise JournalFileError(f"no journal file {path}")
    if len(data) > MAX_FILE_BYTES:
        raise JournalFileError(f"the journal file {path} is over {MAX_FILE_BYTES} bytes")
    try:
        kept = msgspec.json.decode(data, type=_File)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise JournalFileError(
            f"{path} is not a journal file of dsh-code run, or it is damaged: {exc}"
        ) from None
    if kept.format != FILE_FORMAT or kept.version != _VERSION:
        raise JournalFileError(
            f"{path} is not a journal file this dsh-code reads ({kept.format} {kept.version})"
        )
    try:
        return kept.settings, Journal.loads(bytes(kept.journal))
    except JournalError as exc:
        raise JournalFileError(f"cannot resume from {path}: {exc}") from None
