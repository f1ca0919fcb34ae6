"""Frames on the wire: encoding, reassembly from any chunking, and oversized frames."""

from __future__ import annotations

import msgspec
from hypothesis import given
from hypothesis import strategies as st

from runtime._wire import HEADER, Call, Done, Failed, FrameBuffer, encode_frame

_decoder = msgspec.json.Decoder(Call | Done | Failed)


@given(
    st.lists(st.tuples(st.integers(0, 2**40), st.text(max_size=20)), min_size=1, max_size=8),
    st.lists(st.integers(1, 50), min_size=1, max_size=30),
)
def test_frames_reassemble_from_any_chunking(calls: list[tuple[int, str]], cuts: list[int]) -> None:
    messages = [
        Call(id=i, name=n, args=msgspec.Raw(msgspec.json.encode({"n": n}))) for i, n in calls
    ]
    stream = b"".join(encode_frame(m) for m in messages)
    buf = FrameBuffer(1 << 20)
    bodies: list[bytes] = []
    pos = 0
    for cut in cuts * (len(stream) // max(sum(cuts), 1) + 1):
        if pos >= len(stream):
            break
        bodies += buf.feed(stream[pos : pos + cut])
        pos += cut
    bodies += buf.feed(stream[pos:])
    assert [_decoder.decode(b) for b in bodies] == messages
    assert buf.pending == 0


@given(st.integers(101, 10_000), st.integers(1, 64))
def test_oversized_frames_are_skipped_and_counted(size: int, chunk: int) -> None:
    good = encode_frame(Done(has_value=True, value=msgspec.Raw(b"1")))
    stream = HEADER.pack(size) + b"x" * size + good
    buf = FrameBuffer(100)
    bodies: list[bytes] = []
    for i in range(0, len(stream), chunk):
        bodies += buf.feed(stream[i : i + chunk])
    assert buf.oversized == 1
    assert [_decoder.decode(b) for b in bodies] == [Done(has_value=True, value=msgspec.Raw(b"1"))]


@given(st.binary(max_size=300))
def test_garbage_never_raises_out_of_the_buffer(data: bytes) -> None:
    buf = FrameBuffer(64)
    for body in buf.feed(data):
        try:
            _decoder.decode(body)
        except msgspec.DecodeError:
            pass


def test_failed_frames_omit_absent_facts() -> None:
    frame = encode_frame(Failed(kind="memory", message="m"))
    assert frame[HEADER.size :] == b'{"type":"Failed","kind":"memory","message":"m"}'
