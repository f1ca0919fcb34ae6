"""Journals: a run's settled binding calls, in the language-neutral form a resume replays.

A journal is JSON (UTF-8), one object, written by ``Journal.dumps``::

    {"format": "dsh-code-journal", "version": 1, "language": "python",
     "run_id": "9f2c4e1a0b3d5e7f", "program": "<the program's text>",
     "inputs_sha256": "<hex>", "state_sha256": "<hex>" | null,
     "seeds": {"hash": 2654435761, "random": 8532117920412},
     "logs": 2,
     "calls": [{"seq": 1, "name": "tools.charge", "args": {"amount": 5}, "value": "ch_1"},
               {"seq": 3, "name": "tools.lookup", "args": {}, "error":
                    {"tool": "lookup", "message": "not found", "code": "TOOL_ERROR"}}],
     "pending": [{"seq": 2, "call_id": "9f2c4e1a0b3d5e7f:2", "name": "tools.send_receipt",
                  "args": {}, "reason": "approval needed: send the receipt"}],
     "sha256": "<hex>"}

``seq`` is a call's place in the order the program issued its calls (1, 2, ...), the
``<seq>`` of its call id ``<run id>:<seq>``. ``calls`` are the calls that settled, in the
order they settled (not the order of ``seq``: gathered calls settle as they finish), each
with ``value`` or ``error``. ``pending`` are the calls held when the run paused, each with
why. ``inputs_sha256`` is the SHA-256 of the inputs' JSON with sorted keys and no spaces;
``state_sha256`` that of the session state the run started from (null: not a session run,
or a run that completed). ``seeds`` are what the runtime fixed in the child (``hash``: the
interpreter's hash seed, 0 when not fixed; ``random``: the seed of the ``random`` module);
``logs`` the log lines the run had written. ``sha256`` comes last: the SHA-256 of the bytes
before it, with the ``,"sha256":"..."`` member taken out (the document up to it, then
``}``), so any change to the text is seen. A runtime of another language writes the same
members; ``language`` says which runtime may replay it.
"""

from __future__ import annotations

import hashlib
import re
from typing import Any, Final, Literal

import msgspec

from runtime._errors import RuntimeUsageError

__all__ = (
    "JOURNAL_FORMAT",
    "JOURNAL_VERSION",
    "CallFailure",
    "Decision",
    "Journal",
    "JournalCall",
    "JournalError",
    "PendingCall",
    "Seeds",
    "inputs_digest",
)

JOURNAL_FORMAT: Final = "dsh-code-journal"
JOURNAL_VERSION: Final = 1

#: What a resume does with a pending call: execute it ("allow", or True) or refuse it
#: ("deny", or False).
Decision = Literal["allow", "deny"] | bool

_decoder = msgspec.json.Decoder()
_SUFFIX = re.compile(rb',"sha256":"([0-9a-f]{64})"\}\s*\Z')
_encoder = msgspec.json.Encoder()
_sorted_encoder = msgspec.json.Encoder(order="sorted")
#: Longest text of a journal a message quotes (an argument, a value).
_SHOWN = 200


class JournalError(RuntimeUsageError):
    """Raised when a journal cannot be read (truncated, tampered with, not a journal), or
    does not fit the run that is to resume it (another program, other inputs, another
    session state, another language, a decision for a call it does not hold)."""


class CallFailure(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """How a binding call failed: what the program's ``ToolCallError`` carried."""

    tool: str
    message: str
    code: str
    exception_type: str | None = None
    """The builtin exception it failed with (``KeyError``): the error in the program is one."""


class JournalCall(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """One settled binding call: its place in the order of issue, what it asked, its outcome.

    ``args`` and ``value`` are raw JSON (``msgspec.Raw``: ``msgspec.json.decode`` reads
    them), kept as the bytes that crossed, so a journal cannot change once made.
    """

    seq: int
    name: str
    args: msgspec.Raw
    value: msgspec.Raw | msgspec.UnsetType = msgspec.UNSET
    """The call's value when it succeeded."""
    error: CallFailure | None = None
    """Why it failed, when it did."""

    @property
    def size(self) -> int:
        """The bytes it counts against ``max_journal_bytes``."""
        outcome = self.error
        if outcome is not None:
            extra = len(outcome.tool) + len(outcome.message) + len(outcome.code)
        elif isinstance(self.value, msgspec.Raw):
            extra = len(self.value)
        else:
            extra = 0
        return len(self.name) + len(self.args) + extra


class PendingCall(msgspec.Struct, frozen=True, kw_only=True):
    """A call held when its run paused: what it asked, and why it was held."""

    seq: int
    call_id: str
    """``<run id>:<seq>``: the key of its decision when the run is resumed."""
    name: str
    args: Any
    reason: str


class Seeds(msgspec.Struct, frozen=True, kw_only=True):
    """What a runtime fixed in the child so a replay takes the same paths."""

    hash: int
    """The interpreter's hash seed (``PYTHONHASHSEED``): str and bytes hashes, set order."""
    random: int
    """The seed of the ``random`` module's generator."""


class Journal(msgspec.Struct, frozen=True, kw_only=True):
    """A run's settled binding calls and held ones: immutable, versioned, JSON (``dumps``)."""

    format: str = JOURNAL_FORMAT
    version: int = JOURNAL_VERSION
    language: str
    run_id: str
    program: str
    inputs_sha256: str
    state_sha256: str | None = None
    seeds: Seeds
    logs: int = 0
    """The log lines the run had written: a resume leaves out as many, written again."""
    calls: tuple[JournalCall, ...] = ()
    """The settled calls, in the order they settled."""
    pending: tuple[PendingCall, ...] = ()
    """The calls held when the run paused (empty: it did not pause)."""

    @property
    def size(self) -> int:
        """The bytes its calls count against ``max_journal_bytes``."""
        return sum(call.size for call in self.calls)

    def dumps(self) -> bytes:
        """The journal as JSON bytes, its checksum last (what ``loads`` reads back)."""
        body = _encoder.encode(self)
        digest = hashlib.sha256(body).hexdigest()
        return body[:-1] + b',"sha256":"' + digest.encode() + b'"}'

    def to_json(self) -> dict[str, Any]:
        """The journal as a JSON object (with its checksum), for ``from_json``."""
        value: dict[str, Any] = msgspec.json.decode(self.dumps())
        return value

    @classmethod
    def loads(cls, data: bytes | str) -> Journal:
        """Read a journal from ``dumps``' bytes; ``JournalError`` says what is wrong."""
        raw = data.encode() if isinstance(data, str) else bytes(data)
        match = _SUFFIX.search(raw)
        if match is None:
            if not raw.strip():
                raise JournalError("the journal is empty")
            raise JournalError(
                "the journal is truncated or altered: it does not end with its checksum"
            )
        body = raw[: match.start()] + b"}"
        if hashlib.sha256(body).hexdigest() != match.group(1).decode():
            raise JournalError("the journal was altered: its checksum does not match its content")
        try:
            journal = msgspec.json.decode(body, type=cls)
        except (msgspec.DecodeError, msgspec.ValidationError, RecursionError) as exc:
            raise JournalError(f"the journal cannot be read: {exc}") from None
        journal.check()
        return journal

    @classmethod
    def from_json(cls, value: Any) -> Journal:
        """Read a journal from ``to_json``'s object (it keeps its checksum)."""
        try:
            data = _encoder.encode(value)
        except (TypeError, ValueError, OverflowError, RecursionError) as exc:
            raise JournalError(f"the journal is not JSON: {exc}") from None
        return cls.loads(data)

    def check(self) -> None:
        """Raise ``JournalError`` if the journal is not one a runtime could have written."""
        if self.format != JOURNAL_FORMAT:
            raise JournalError(f"not a journal: format {self.format!r}")
        if self.version != JOURNAL_VERSION:
            raise JournalError(
                f"journal version {self.version} is not one this runtime reads ({JOURNAL_VERSION})"
            )
        seen: set[int] = set()
        for call in self.calls:
            if call.seq < 1 or call.seq in seen:
                raise JournalError(f"the journal's call {call.seq} is out of place")
            if (call.error is None) == (call.value is msgspec.UNSET):
                raise JournalError(f"the journal's call {call.seq} has no outcome, or two")
            seen.add(call.seq)
        for held in self.pending:
            if held.seq < 1 or held.seq in seen or held.call_id != f"{self.run_id}:{held.seq}":
                raise JournalError(f"the journal's pending call {held.seq} is out of place")
            seen.add(held.seq)

    def __repr__(self) -> str:
        paused = f", {len(self.pending)} pending" if self.pending else ""
        return f"<Journal of run {self.run_id}: {len(self.calls)} calls{paused}>"


def inputs_digest(inputs: Any) -> str:
    """The SHA-256 of the inputs' JSON with sorted keys (``inputs_sha256``)."""
    if not inputs:
        return _EMPTY_INPUTS
    return hashlib.sha256(_sorted_encoder.encode(dict(inputs))).hexdigest()


_EMPTY_INPUTS: Final = hashlib.sha256(b"{}").hexdigest()


def shown(raw: bytes | msgspec.Raw) -> str:
    """Raw JSON as a message quotes it: cut when long."""
    text = bytes(raw).decode("utf-8", "replace")
    return text if len(text) <= _SHOWN else text[: _SHOWN - 1] + "…"


def same_json(a: bytes | msgspec.Raw, b: bytes | msgspec.Raw) -> bool:
    """Whether two raw JSON texts are the same value (types kept apart: 1, 1.0, true)."""
    a, b = bytes(a), bytes(b)
    if a == b:
        return True
    try:
        return _same(_decoder.decode(a), _decoder.decode(b))
    except (msgspec.DecodeError, RecursionError):
        return False


def _same(a: Any, b: Any) -> bool:
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(v, b[k]) for k, v in a.items())
    if isinstance(a, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)
