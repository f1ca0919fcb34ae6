"""What crosses between the caller and a node's actor: JSON only, as tagged msgspec Structs.

The caller sends a ``Submission`` (every ``RunRequest`` field but the caller's callables,
plus the binding names, and a journal to resume), then batches of ``Answer``/``Refusal``/
``Held`` replies; each call returns a batch of ``Event``s: ``Started``, ``Logs``,
``CallOut``, ``Progress``, and last ``Finished`` (the result, with its journal) or
``Refused``. A resumed run is replayed on the node; its held calls come to the caller with
``approved`` when the resume allowed them, and a binding that holds its call says ``Held``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import msgspec

from runtime import (
    AbortSignalLike,
    Binding,
    Decision,
    Journal,
    RunRequest,
    RunResult,
    RunStats,
    RuntimeUsageError,
)

__all__ = (
    "CALLER_FIELDS",
    "PROTOCOL",
    "Answer",
    "CallOut",
    "Event",
    "Finished",
    "Held",
    "Logs",
    "NodeInfo",
    "Progress",
    "Refusal",
    "Refused",
    "Reply",
    "Started",
    "Submission",
    "decode_events",
    "decode_info",
    "decode_replies",
    "decode_request",
    "decode_resume",
    "encode",
    "encode_request",
    "forwarded_fields",
)

#: Bumped when a message changes shape; a node speaking another version is not used.
PROTOCOL = 2

#: ``RunRequest`` fields that stay in the caller's process (callables, the abort signal).
CALLER_FIELDS = frozenset({"bindings", "on_log", "abort", "on_progress"})


class Submission(msgspec.Struct, frozen=True, kw_only=True):
    """One run for a node: the forwarded request fields and the names of its bindings."""

    fields: dict[str, Any]
    bindings: list[str]
    progress: bool = False
    """Whether the caller wants ``Progress`` events (it has an ``on_progress``)."""
    resume: Journal | None = None
    """The journal of the run to resume (replayed on the node)."""
    decisions: dict[str, Decision] = msgspec.field(default_factory=dict)
    """For the journal's held calls: call id -> "allow" or "deny"."""
    trace: dict[str, str] = msgspec.field(default_factory=dict)
    """The caller's trace context (W3C ``traceparent``/``tracestate``): the node's spans join it."""


class _ResumePart(msgspec.Struct, frozen=True):
    """What a node reads of a ``Submission`` to resume a run."""

    resume: Journal | None = None
    decisions: dict[str, Decision] = msgspec.field(default_factory=dict)


class NodeInfo(msgspec.Struct, frozen=True, kw_only=True):
    """What a node's actor says when it is ready."""

    protocol: int
    fields: list[str]
    node_id: str
    host: str
    address: str
    pid: int
    isolation: str
    why_not_namespaces: str
    cgroups: list[str]
    max_concurrent_runs: int


class Started(msgspec.Struct, frozen=True, tag="s", array_like=True):
    """The node has taken the run: first in the run's first batch, which leaves the node at
    the run's first log line or call, at its end, or ``STARTED_AFTER_S`` into it. A run the
    caller never heard of before its node was lost may run elsewhere: none of its calls was
    answered and none of its lines seen."""


class Logs(msgspec.Struct, frozen=True, tag="l", array_like=True):
    """Log lines, in the order the child wrote them."""

    lines: list[str]


class CallOut(msgspec.Struct, frozen=True, tag="c", array_like=True):
    """The program called binding ``name``; the caller answers with the same ``id``."""

    id: int
    name: str
    args: Any
    approved: bool = False
    """The resume of the run allowed this held call: execute it without asking."""


class Progress(msgspec.Struct, frozen=True, tag="p", array_like=True):
    """The run's figures so far (only when the caller has an ``on_progress``)."""

    stats: RunStats


class Finished(msgspec.Struct, frozen=True, tag="f", array_like=True):
    """The run settled; ``result.logs`` is empty (the lines came as ``Logs``)."""

    result: RunResult


class Refused(msgspec.Struct, frozen=True, tag="r", array_like=True):
    """The node did not run the program: the request broke the contract, or the node cannot
    run programs (``node_trouble``: another node may)."""

    message: str
    node_trouble: bool


Event = Started | Logs | CallOut | Progress | Finished | Refused


class Answer(msgspec.Struct, frozen=True, tag="a", array_like=True):
    """A binding's value, for call ``id``."""

    id: int
    value: Any


class Refusal(msgspec.Struct, frozen=True, tag="e", array_like=True):
    """A binding failed; the program sees ``ToolCallError(tool, message, code)``."""

    id: int
    tool: str
    message: str
    code: str
    exception_type: str | None = None
    """The builtin exception the call failed with: the program's error is one too."""


class Held(msgspec.Struct, frozen=True, tag="h", array_like=True):
    """The binding held call ``id`` (``HoldCall``): the run pauses on the node."""

    id: int
    reason: str


Reply = Answer | Refusal | Held

_encoder = msgspec.json.Encoder()
_events = msgspec.json.Decoder(list[Event])
_replies = msgspec.json.Decoder(list[Reply])
_submission = msgspec.json.Decoder(Submission)
_resume_part = msgspec.json.Decoder(_ResumePart)
_info = msgspec.json.Decoder(NodeInfo)


def encode(message: object) -> bytes:
    """The JSON bytes of a message, a batch of events or a ``NodeInfo``."""
    return _encoder.encode(message)


def decode_events(data: bytes) -> list[Event]:
    """A batch of events (raises ``msgspec.DecodeError`` on anything else)."""
    return _events.decode(data)


def decode_replies(data: bytes) -> list[Reply]:
    """A batch of replies (calls answered in the same moment go together)."""
    return _replies.decode(data)


def decode_info(data: bytes) -> NodeInfo:
    """A node's ``NodeInfo``."""
    return _info.decode(data)


def forwarded_fields() -> tuple[str, ...]:
    """The ``RunRequest`` fields that travel to the node, in declaration order."""
    return tuple(f for f in RunRequest.__struct_fields__ if f not in CALLER_FIELDS)


def _field_types() -> dict[str, Any]:
    return {f.name: f.type for f in msgspec.structs.fields(RunRequest) if f.name in _FORWARDED}


_FORWARDED = frozenset(forwarded_fields())
_TYPES: dict[str, Any] | None = None


def encode_request(
    request: RunRequest,
    *,
    progress: bool,
    resume: Journal | None = None,
    decisions: Mapping[str, Decision] | None = None,
    trace: Mapping[str, str] | None = None,
) -> bytes:
    """The ``Submission`` of ``request``: each field that is not the caller's, generically,
    and the caller's ``trace`` context."""
    fields = {name: getattr(request, name) for name in forwarded_fields()}
    submission = Submission(
        fields=fields,
        bindings=sorted(request.bindings),
        progress=progress,
        resume=resume,
        decisions=dict(decisions or {}),
        trace=dict(trace or {}),
    )
    return encode(submission)


def decode_resume(data: bytes) -> tuple[Journal | None, dict[str, Decision]]:
    """The journal a ``Submission`` resumes, and its decisions (a submission
    ``decode_request`` read already: raises ``RuntimeUsageError`` only for the journal)."""
    try:
        part = _resume_part.decode(data)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise RuntimeUsageError(f"the run's journal is not readable: {exc}") from exc
    return part.resume, part.decisions


def decode_request(
    data: bytes,
    *,
    binding: Callable[[str], Binding],
    on_log: Callable[[str], None],
    abort: AbortSignalLike,
    on_progress: Callable[[RunStats], None],
    trace: dict[str, str] | None = None,
) -> RunRequest:
    """The ``RunRequest`` a node runs: the forwarded fields plus local stand-ins for the
    caller's callables (``binding(name)`` makes one per binding); ``trace``, if given, gets
    the caller's trace context. Raises ``RuntimeUsageError`` for a field this version does
    not know or a bad value."""
    global _TYPES
    if _TYPES is None:
        _TYPES = _field_types()
    try:
        submission = _submission.decode(data)
    except msgspec.DecodeError as exc:
        raise RuntimeUsageError(f"the run's submission is not readable: {exc}") from exc
    fields: dict[str, Any] = {}
    for name, value in submission.fields.items():
        kind = _TYPES.get(name)
        if kind is None:
            raise RuntimeUsageError(
                f"RunRequest field {name!r} is unknown to this node's dsh-code (another version?)"
            )
        try:
            fields[name] = msgspec.convert(value, kind)
        except (msgspec.ValidationError, ValueError) as exc:
            raise RuntimeUsageError(f"RunRequest field {name!r}: {exc}") from exc
    if trace is not None:
        trace.update(submission.trace)
    bindings: Mapping[str, Binding] = {name: binding(name) for name in submission.bindings}
    return RunRequest(
        **fields,
        bindings=bindings,
        on_log=on_log,
        abort=abort,
        on_progress=on_progress if submission.progress else None,
    )
