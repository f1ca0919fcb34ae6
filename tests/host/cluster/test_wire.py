"""The caller <-> node messages: requests forwarded field by field, events and replies round-trip."""

from __future__ import annotations

import asyncio
from typing import Any

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from host.cluster._wire import (
    CALLER_FIELDS,
    Answer,
    CallOut,
    Finished,
    Logs,
    Progress,
    Refusal,
    Refused,
    Started,
    Submission,
    decode_events,
    decode_replies,
    decode_request,
    encode,
    encode_request,
    forwarded_fields,
)
from runtime import Limits, RunError, RunRequest, RunResult, RunStats, RuntimeUsageError

json_values: st.SearchStrategy[Any] = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**60), max_value=10**60)  # any size: never a float
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=4), inner, max_size=4)
    ),
    max_leaves=16,
)
identifiers = st.from_regex(r"[a-z_][a-z0-9_]{0,6}", fullmatch=True)
limits = st.builds(
    Limits,
    compute_ms=st.integers(1, 10**6),
    max_wall_ms=st.integers(1, 10**7),
    max_output_bytes=st.integers(1, 10**9),
    max_heap_mb=st.integers(1, 10**5),
    max_parallel_sub_calls=st.integers(1, 100),
)


async def _binding(args: Any) -> Any:
    return args


def _decoded(data: bytes) -> RunRequest:
    return decode_request(
        data,
        binding=lambda name: _binding,
        on_log=lambda line: None,
        abort=asyncio.Event(),
        on_progress=lambda stats: None,
    )


def test_every_field_but_the_callers_own_is_forwarded() -> None:
    assert set(forwarded_fields()) | CALLER_FIELDS == set(RunRequest.__struct_fields__)
    assert not set(forwarded_fields()) & CALLER_FIELDS


@given(
    program=st.text(max_size=40),
    inputs=st.dictionaries(identifiers, json_values, max_size=4),
    limits=limits,
    policy=st.sampled_from(["python", "restricted"]),
    names=st.lists(
        st.builds(lambda a, b: f"{a}.{b}", identifiers, identifiers) | identifiers,
        max_size=4,
        unique=True,
    ),
    progress=st.booleans(),
)
def test_a_request_arrives_with_the_same_fields(
    program: str,
    inputs: dict[str, Any],
    limits: Limits,
    policy: str,
    names: list[str],
    progress: bool,
) -> None:
    request = RunRequest(
        program=program,
        inputs=inputs,
        limits=limits,
        policy=policy,  # type: ignore[arg-type]
        bindings={name: _binding for name in names},
        on_progress=(lambda stats: None) if progress else None,
    )
    arrived = _decoded(encode_request(request, progress=progress))
    for name in forwarded_fields():
        assert getattr(arrived, name) == getattr(request, name), name
    assert sorted(arrived.bindings) == sorted(names)
    assert all(b is _binding for b in arrived.bindings.values())
    assert (arrived.on_progress is not None) is progress
    assert arrived.on_log is not None and arrived.abort is not None


def test_the_callers_trace_context_travels_and_an_older_caller_sends_none() -> None:
    carrier = {"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}
    trace: dict[str, str] = {}
    decode_request(
        encode_request(RunRequest(program="1"), progress=False, trace=carrier),
        binding=lambda name: _binding,
        on_log=lambda line: None,
        abort=asyncio.Event(),
        on_progress=lambda stats: None,
        trace=trace,
    )
    assert trace == carrier
    older = msgspec.json.encode({"fields": {"program": "1"}, "bindings": []})
    trace.clear()
    decode_request(
        older,
        binding=lambda name: _binding,
        on_log=lambda line: None,
        abort=asyncio.Event(),
        on_progress=lambda stats: None,
        trace=trace,
    )
    assert trace == {}


def test_an_unknown_field_or_a_bad_value_is_a_usage_error() -> None:
    unknown = encode(Submission(fields={"program": "1", "from_the_future": 1}, bindings=[]))
    with pytest.raises(RuntimeUsageError, match="'from_the_future' is unknown to this node"):
        _decoded(unknown)
    bad = encode(Submission(fields={"program": "1", "limits": {"compute_ms": 0}}, bindings=[]))
    with pytest.raises(RuntimeUsageError, match="limits"):
        _decoded(bad)
    with pytest.raises(RuntimeUsageError, match="not readable"):
        _decoded(b"[1")


stats = st.builds(
    RunStats,
    isolation=st.sampled_from(["namespaces", "process"]),
    compute_ms=st.floats(0, 1e6),
    wall_ms=st.floats(0, 1e6),
    calls=st.integers(0, 10**6),
    dropped_frames=st.integers(0, 10),
    node=st.none() | st.text(alphabet="0123456789abcdef", min_size=56, max_size=56),
)
results = st.builds(
    RunResult,
    logs=st.just([]),
    value=st.just(msgspec.UNSET) | json_values,
    error=st.none()
    | st.builds(
        RunError,
        kind=st.sampled_from(["exception", "died", "budget"]),
        message=st.text(max_size=20),
        exit_status=st.none() | st.integers(-64, 255),
    ),
    stats=st.none() | stats,
)
events = st.lists(
    st.just(Started())
    | st.builds(Logs, lines=st.lists(st.text(max_size=10), max_size=3))
    | st.builds(CallOut, id=st.integers(1, 10**9), name=identifiers, args=json_values)
    | st.builds(Progress, stats=stats)
    | st.builds(Finished, result=results)
    | st.builds(Refused, message=st.text(max_size=10), node_trouble=st.booleans()),
    max_size=6,
)


@given(events)
def test_a_batch_of_events_round_trips(batch: list[Any]) -> None:
    assert decode_events(encode(batch)) == batch


@given(
    st.builds(Answer, id=st.integers(1, 10**9), value=json_values)
    | st.builds(
        Refusal,
        id=st.integers(1, 10**9),
        tool=identifiers,
        message=st.text(max_size=10),
        code=st.sampled_from(["TOOL_ERROR", "DENIED"]),
    )
)
def test_replies_round_trip(reply: Answer | Refusal) -> None:
    assert decode_replies(encode([reply, reply])) == [reply, reply]


def test_big_integers_stay_integers() -> None:
    (call,) = decode_events(encode([CallOut(id=1, name="f", args={"n": 10**80})]))
    assert isinstance(call, CallOut) and call.args == {"n": 10**80}
