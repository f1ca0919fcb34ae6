"""The log intake: lines as ``python`` would split them, however the bytes arrive, within caps."""

from __future__ import annotations

import itertools

from hypothesis import given
from hypothesis import strategies as st

from host.sandbox._logs import LogIntake, held

_text = st.binary(max_size=400).map(lambda b: b.replace(b"\r", b""))


def _chunks(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(data) + 1) for c in cuts} | {0, len(data)})
    return [data[a:b] for a, b in itertools.pairwise(points)]


def _expected(data: bytes) -> list[str]:
    lines = data.split(b"\n")
    if lines[-1] == b"":
        lines.pop()  # a final newline ends the last line; it does not start one
    return [line.decode("utf-8", "replace") for line in lines]


@given(_text, st.lists(st.integers(min_value=0, max_value=500), max_size=20))
def test_lines_do_not_depend_on_how_the_bytes_arrive(data: bytes, cuts: list[int]) -> None:
    seen: list[str] = []
    logs = LogIntake(max_bytes=1 << 20, max_lines=1 << 20, on_log=seen.append)
    for chunk in _chunks(data, cuts):
        logs.feed(chunk)
    logs.close()
    assert logs.lines == seen == _expected(data)
    assert logs.bytes == len(data) and logs.over is None


@given(_text, st.integers(min_value=0, max_value=300), st.lists(st.integers(0, 500), max_size=8))
def test_the_output_cap_keeps_every_byte_up_to_it(data: bytes, cap: int, cuts: list[int]) -> None:
    logs = LogIntake(max_bytes=cap, max_lines=1 << 20, on_log=None)
    for chunk in _chunks(data, cuts):
        logs.feed(chunk)
    logs.close()
    assert logs.bytes == min(len(data), cap)
    assert logs.lines == _expected(data[:cap])  # a line the cap cut is kept up to the cap
    assert (logs.over is not None) == (len(data) > cap)


def test_one_line_longer_than_the_cap_is_kept_up_to_it() -> None:
    logs = LogIntake(max_bytes=10, max_lines=100, on_log=None)
    logs.feed(b"x" * 64)
    logs.close()
    assert logs.lines == ["x" * 10]
    assert logs.over is not None and "max_output_bytes (10)" in logs.over


def test_the_line_cap_drops_what_follows_it() -> None:
    logs = LogIntake(max_bytes=1 << 20, max_lines=3, on_log=None)
    logs.feed(b"a\nb\nc\nd\ne\nunfinished")
    logs.close()
    assert logs.lines == ["a", "b", "c"]
    assert logs.over is not None and "3 lines" in logs.over


def test_a_raising_callback_does_not_lose_lines() -> None:
    def broken(line: str) -> None:
        raise RuntimeError("the caller's bug")

    logs = LogIntake(max_bytes=100, max_lines=100, on_log=broken)
    logs.feed(b"one\ntwo\n")
    assert logs.lines == ["one", "two"]


def test_a_line_still_open_is_decoded_as_it_arrives() -> None:
    # Its end then costs only its last chunk: decoding (or joining) a 64 MiB line in one step
    # at its end held the host's event loop ~80 ms.
    logs = LogIntake(max_bytes=1 << 20, max_lines=100, on_log=None)
    logs.feed("é".encode()[:1])
    logs.feed("é".encode()[1:] + b"x" * 10)
    assert logs._open_text == "é" + "x" * 10
    logs.feed(b"y\n")
    assert logs.lines == ["é" + "x" * 10 + "y"] and logs._open_text == ""


_wide_text = st.lists(
    st.sampled_from(
        [b"a" * 7, b"\xc3\xa9", "\u0101".encode(), "\U0001f600".encode(), b"\x80", b"\n"]
    ),
    max_size=60,
).map(b"".join)


@given(
    _wide_text, st.integers(min_value=1, max_value=300), st.lists(st.integers(0, 500), max_size=8)
)
def test_what_the_host_holds_decoded_stays_within_twice_the_cap(
    data: bytes, cap: int, cuts: list[int]
) -> None:
    logs = LogIntake(max_bytes=cap, max_lines=1 << 20, on_log=None)
    for chunk in _chunks(data, cuts):
        logs.feed(chunk)
    logs.close()
    decoded = sum(held(line) for line in logs.lines)
    assert decoded == logs.held <= 2 * cap
    if logs.over is None:
        assert logs.lines == _expected(data)  # nothing cut while it fits


def test_a_mostly_ascii_line_with_one_emoji_is_held_to_twice_the_cap() -> None:
    # 905 bytes as written, under the cap; 3 604 bytes as the host holds it (4 a character)
    logs = LogIntake(max_bytes=1000, max_lines=100, on_log=None)
    logs.feed(("x" * 900 + "\U0001f600\n").encode())
    logs.close()
    assert logs.bytes == 905  # with its newline
    assert logs.held <= 2000 and held(logs.lines[0]) == logs.held
    assert logs.over is not None and "twice max_output_bytes (1000)" in logs.over
