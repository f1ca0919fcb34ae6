"""Journals: the JSON form (round trip, checksum), what a reader refuses, and value equality."""

from __future__ import annotations

import json
from typing import Any

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from runtime import CallFailure, Journal, JournalCall, JournalError, PendingCall, Seeds
from runtime._journal import inputs_digest, same_json

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**200), max_value=2**200)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)


def _raw(value: Any) -> msgspec.Raw:
    return msgspec.Raw(msgspec.json.encode(value))


def _journal(**overrides: Any) -> Journal:
    fields: dict[str, Any] = {
        "language": "python",
        "run_id": "r1",
        "program": "return 1",
        "inputs_sha256": inputs_digest({}),
        "seeds": Seeds(hash=7, random=11),
        "logs": 2,
        "calls": (
            JournalCall(seq=1, name="tools.charge", args=_raw({"amount": 5}), value=_raw("ch_1")),
            JournalCall(
                seq=3,
                name="tools.lookup",
                args=_raw({}),
                error=CallFailure(tool="lookup", message="not found", code="TOOL_ERROR"),
            ),
        ),
        "pending": (
            PendingCall(seq=2, call_id="r1:2", name="tools.send", args={}, reason="approval"),
        ),
    }
    fields.update(overrides)
    return Journal(**fields)


@given(st.lists(st.tuples(json_values, json_values), max_size=5), st.text(), json_values)
def test_a_journal_reads_back_as_it_was_written(
    calls: list[tuple[Any, Any]], program: str, held: Any
) -> None:
    journal = _journal(
        program=program,
        calls=tuple(
            JournalCall(seq=i + 1, name=f"tools.t{i}", args=_raw(a), value=_raw(v))
            for i, (a, v) in enumerate(calls)
        ),
        pending=(
            PendingCall(
                seq=len(calls) + 1,
                call_id=f"r1:{len(calls) + 1}",
                name="tools.h",
                args=held,
                reason="why",
            ),
        ),
    )
    data = journal.dumps()
    again = Journal.loads(data)
    assert again == journal
    assert again.dumps() == data
    assert Journal.from_json(json.loads(data)) == journal  # through plain Python objects too
    assert Journal.from_json(journal.to_json()) == journal


def test_the_json_members_are_the_documented_ones() -> None:
    obj = json.loads(_journal().dumps())
    assert list(obj) == [
        "format",
        "version",
        "language",
        "run_id",
        "program",
        "inputs_sha256",
        "state_sha256",
        "seeds",
        "logs",
        "calls",
        "pending",
        "sha256",
    ]
    assert obj["format"] == "dsh-code-journal" and obj["version"] == 1
    assert obj["calls"][0] == {
        "seq": 1,
        "name": "tools.charge",
        "args": {"amount": 5},
        "value": "ch_1",
    }
    assert obj["calls"][1]["error"] == {
        "tool": "lookup",
        "message": "not found",
        "code": "TOOL_ERROR",
    }
    assert obj["pending"] == [
        {"seq": 2, "call_id": "r1:2", "name": "tools.send", "args": {}, "reason": "approval"}
    ]


def test_the_checksum_covers_the_document_before_it() -> None:
    import hashlib

    data = _journal().dumps()
    head, _, tail = data.rpartition(b',"sha256":"')
    assert hashlib.sha256(head + b"}").hexdigest() == tail[:-2].decode()


@pytest.mark.parametrize(
    ("mangle", "says"),
    [
        (lambda d: d.replace(b'"ch_1"', b'"ch_2"'), "altered"),  # a recorded value edited
        (lambda d: d[: len(d) // 2], "truncated"),
        (lambda d: d[:-90] + d[-77:], "altered"),  # bytes lost before the checksum
        (lambda d: b"", "empty"),
        (lambda d: b"   \n", "empty"),
        (lambda d: d.replace(b',"sha256"', b',"sha257"'), "truncated"),
        (lambda d: b"[1, 2, 3]", "truncated"),
    ],
)
def test_a_tampered_or_truncated_journal_is_refused_clearly(mangle: Any, says: str) -> None:
    with pytest.raises(JournalError, match=says):
        Journal.loads(mangle(_journal().dumps()))


def test_a_trailing_newline_is_not_a_change() -> None:
    assert Journal.loads(_journal().dumps() + b"\n") == _journal()


def _resealed(obj: dict[str, Any]) -> bytes:
    """A document with a valid checksum over whatever it holds (a forger's, or a bug's)."""
    import hashlib

    obj.pop("sha256", None)
    body = msgspec.json.encode(obj)
    return body[:-1] + b',"sha256":"' + hashlib.sha256(body).hexdigest().encode() + b'"}'


@pytest.mark.parametrize(
    ("change", "says"),
    [
        ({"format": "other"}, "not a journal"),
        ({"version": 2}, "version 2"),
        ({"calls": [{"seq": 1, "name": "t", "args": {}}]}, "no outcome"),
        ({"calls": [{"seq": 1, "name": "t", "args": {}, "value": 1, "error": None}]}, None),
        (
            {"calls": [{"seq": 1, "name": "t", "args": {}, "value": 1}] * 2},
            "out of place",
        ),
        ({"calls": [{"seq": 0, "name": "t", "args": {}, "value": 1}]}, "out of place"),
        (
            {"pending": [{"seq": 1, "call_id": "r1:1", "name": "t", "args": {}, "reason": ""}]},
            "out of place",  # seq 1 settled already
        ),
        (
            {"pending": [{"seq": 9, "call_id": "x:9", "name": "t", "args": {}, "reason": ""}]},
            "out of place",  # the call id of another run
        ),
        ({"seeds": {"hash": "x", "random": 1}}, "cannot be read"),
        ({"calls": "none"}, "cannot be read"),
    ],
)
def test_a_journal_no_runtime_could_write_is_refused(
    change: dict[str, Any], says: str | None
) -> None:
    obj = _journal().to_json()
    obj.update(change)
    data = _resealed(obj)
    if says is None:  # an error member of null beside a value: one outcome, read as such
        assert bytes(Journal.loads(data).calls[0].value) == b"1"  # type: ignore[arg-type]
        return
    with pytest.raises(JournalError, match=says):
        Journal.loads(data)


def test_from_json_refuses_what_is_not_json() -> None:
    with pytest.raises(JournalError, match="not JSON"):
        Journal.from_json({"x": object()})


def test_its_size_is_what_counts_against_the_bound() -> None:
    journal = _journal()
    sizes = [len("tools.charge") + len(b'{"amount":5}') + len(b'"ch_1"')]
    sizes.append(len("tools.lookup") + len(b"{}") + len("lookup") + len("not found") + 10)
    assert journal.size == sum(sizes)


@given(json_values)
def test_same_json_is_value_equality_whatever_the_bytes(value: Any) -> None:
    pretty = json.dumps(value, indent=1).encode()
    assert same_json(msgspec.json.encode(value), pretty)


@pytest.mark.parametrize(
    ("a", "b", "same"),
    [
        (b"1", b"1.0", False),
        (b"1", b"true", False),
        (b"0", b"false", False),
        (b'{"a":1,"b":2}', b'{"b":2,"a":1}', True),
        (b"[1,2]", b"[2,1]", False),
        (b'{"a":[1,{"b":null}]}', b'{ "a" : [ 1 , { "b" : null } ] }', True),
        (b"{", b"{", True),  # the same bytes: nothing to read
        (b"{", b"{}", False),
    ],
)
def test_same_json_keeps_types_apart(a: bytes, b: bytes, same: bool) -> None:
    assert same_json(a, b) is same


def test_inputs_digest_ignores_key_order() -> None:
    assert inputs_digest({"a": 1, "b": [1]}) == inputs_digest({"b": [1], "a": 1})
    assert inputs_digest({}) == inputs_digest(None) != inputs_digest({"a": 1})
