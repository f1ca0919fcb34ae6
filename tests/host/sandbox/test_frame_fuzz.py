"""Fuzzing the host's frame decoding: random, truncated and oversized frames never raise."""

from __future__ import annotations

import json
import types
from typing import Any

import anyio
import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from host.sandbox._intake import decoder as _decoder
from host.sandbox._options import RunOptions
from host.sandbox._run import Run
from host.sandbox._watchdog import Watchdog
from runtime import Limits, RunRequest
from runtime._wire import HEADER, Call, Done, Failed, FrameBuffer, encode_frame

_KINDS = [
    "exception",
    "invalid_completion",
    "output_limit",
    "memory",
    "budget",
    "died",
    "aborted",
    "parse",
    "",
]
_FIELDS = ["type", "id", "name", "args", "has_value", "value", "kind", "message", "lineno"]
_TYPES = ["Call", "Done", "Failed", "Reply", "ReplyError", "Start", "call", ""]

_json = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=10),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner, max_size=4)
    ),
    max_leaves=12,
)


def _encode(value: Any) -> bytes:
    return json.dumps(value).encode()


_bodies = st.one_of(
    st.builds(
        lambda i, n, a: msgspec.json.encode(Call(id=i, name=n, args=a)),
        st.integers(0, 5),
        st.sampled_from(["tools.echo", "nope", "", "tools"]),
        _json,
    ),
    st.builds(
        lambda h, v: msgspec.json.encode(Done(has_value=h, value=msgspec.Raw(_encode(v)))),
        st.booleans(),
        _json,
    ),
    st.builds(
        lambda k, m, n: msgspec.json.encode(Failed(kind=k, message=m, lineno=n)),
        st.sampled_from(_KINDS),
        st.text(max_size=20),
        st.none() | st.integers(0, 100),
    ),
    st.builds(
        lambda t, d: _encode({**d, "type": t}),
        st.sampled_from(_TYPES),
        st.dictionaries(st.sampled_from(_FIELDS), _json, max_size=5),
    ),
    st.binary(max_size=64),
    st.integers(1, 3000).map(lambda n: b"[" * n + b"]" * n),
    st.sampled_from(
        [
            b'{"type":"Done","has_value":true,"value":1e999}',
            b'{"type":"Done","has_value":true,"value":' + b"9" * 5000 + b"}",
            b'{"type":"Done","has_value":true,"value":NaN}',
            b'{"type":"Call","id":-1,"name":"tools.echo","args":{}}',
            b"",
        ]
    ),
)

_MAX_FRAME = 512


class _Frame:
    """One frame on the wire: its declared length and the bytes that follow the header."""

    def __init__(self, body: bytes, declared: int | None = None) -> None:
        self.body = body
        self.declared = len(body) if declared is None else declared

    @property
    def oversized(self) -> bool:
        return self.declared > _MAX_FRAME

    def wire(self) -> bytes:
        return HEADER.pack(self.declared) + self.body


_frames = st.one_of(
    _bodies.map(_Frame),
    st.integers(_MAX_FRAME + 1, 4 * _MAX_FRAME).map(lambda n: _Frame(b"\x00" * n)),
)

# What may end the stream: nothing, a truncated frame, a huge length prefix, a partial header.
_tails = st.one_of(
    st.just(b""),
    st.builds(
        lambda body, cut: HEADER.pack(len(body)) + body[:cut],
        st.binary(min_size=2, max_size=_MAX_FRAME),
        st.integers(0, 1),
    ),
    st.builds(
        lambda size, rest: HEADER.pack(size) + rest,
        st.integers(_MAX_FRAME + 1, 2**32 - 1),
        st.binary(max_size=100),
    ),
    st.binary(min_size=1, max_size=3),
)


class _Slot:
    """Stands in for the child slot: fds never used here, a template that says its isolation."""

    def __init__(self) -> None:
        self.fds = {"to_child": -1, "from_child": -1, "log": -1, "status": -1}
        self.template = types.SimpleNamespace(isolation="process", alive=True, pid=None)


def _make_run(max_output: int) -> Run:
    request = RunRequest(program="1", limits=Limits(max_output_bytes=max_output))
    options = RunOptions(workdir_root="/nonexistent", max_frame_bytes=_MAX_FRAME)
    return Run(request, b"", _Slot(), options, Watchdog())  # type: ignore[arg-type]


def _feed(frames: list[_Frame], tail: bytes, cuts: list[int], max_output: int) -> None:
    stream = b"".join(f.wire() for f in frames) + tail

    async def check() -> None:
        run = _make_run(max_output)
        pos = 0
        for cut in cuts:
            run._handle_ctl_bytes(stream[pos : pos + cut])
            pos += cut
        run._handle_ctl_bytes(stream[pos:])
        oversized = sum(f.oversized for f in frames)
        tail_oversized = len(tail) >= HEADER.size and HEADER.unpack_from(tail)[0] > _MAX_FRAME
        complete = len(frames) - oversized
        settled = 1 if run.guard.outcome is not None else 0
        # the conservation law: every complete frame is a call, a drop or the settle
        assert run._frames.oversized == oversized + tail_oversized
        assert run.calls.calls + run.calls.dropped + settled == complete
        assert run.calls.in_flight == 0  # no bindings: every call is answered on the spot
        stats = run._result().stats
        assert stats is not None
        assert stats.dropped_frames == run.calls.dropped + run._frames.oversized

    anyio.run(check)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(_frames, max_size=12),
    _tails,
    st.lists(st.integers(1, 700), max_size=20),
    st.sampled_from([10, 1 << 20]),
)
def test_random_frame_streams_never_raise_and_every_frame_is_counted(
    frames: list[_Frame], tail: bytes, cuts: list[int], max_output: int
) -> None:
    _feed(frames, tail, cuts, max_output)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=2000), st.lists(st.integers(1, 300), max_size=10))
def test_arbitrary_bytes_on_the_bridge_never_raise(data: bytes, cuts: list[int]) -> None:
    async def check() -> None:
        run = _make_run(1 << 20)
        pos = 0
        for cut in cuts:
            run._handle_ctl_bytes(data[pos : pos + cut])
            pos += cut
        run._handle_ctl_bytes(data[pos:])
        assert run.calls.calls <= len(data) // HEADER.size

    anyio.run(check)


@settings(max_examples=300, deadline=None)
@given(_bodies)
def test_the_host_decoder_raises_only_decode_errors(body: bytes) -> None:
    try:
        message = _decoder.decode(body)
    except (msgspec.DecodeError, RecursionError):
        return
    assert isinstance(message, Call | Done | Failed)


def test_a_huge_length_prefix_skips_without_buffering() -> None:
    buf = FrameBuffer(64 * 1024 * 1024 + 4096)
    assert buf.feed(HEADER.pack(2**32 - 1) + b"x" * (1 << 20)) == []
    assert buf.oversized == 1
    assert buf.pending == 0
    # the skip swallows the next 4 GiB, a frame inside it included
    assert buf.feed(encode_frame(Done(has_value=True, value=msgspec.Raw(b"1")))) == []
    assert buf.pending == 0


@pytest.mark.parametrize("prefix", [0, 1, _MAX_FRAME, _MAX_FRAME + 1, 2**31, 2**32 - 1])
def test_every_length_prefix_is_handled(prefix: int) -> None:
    if prefix <= _MAX_FRAME:
        _feed([_Frame(b"{" * prefix)], b"", [1, 2, 3], 1 << 20)
    else:
        _feed([], HEADER.pack(prefix) + b"{" * min(prefix, 600), [1, 2, 3], 1 << 20)
