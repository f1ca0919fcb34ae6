"""What a model reads of a run, held to its budget: a head, one line, a tail."""

from __future__ import annotations

import re

from hypothesis import given
from hypothesis import strategies as st

from host.codemode import (
    MIN_MODEL_OUTPUT_BYTES,
    cut_to_budget,
    failure_text,
    left_out_line,
    success_text,
)

_MARKER = re.compile(r"\[\.\.\. ([\d,]+) lines? \(([\d,]+) bytes\)[^\n]*\]\n")

_texts = st.text(
    st.sampled_from(["a", "b", "\n", "é", "😀", " ", "{", "\r"]), min_size=0, max_size=6000
)


def _not_in_full(data: bytes, head: int, tail: int) -> int:
    """Lines of ``data`` (each with its line break) neither its first ``head`` bytes nor its
    last ``tail`` bytes show whole: counted one by one."""
    left, at = 0, 0
    for line in data.split(b"\n"):
        end = at + len(line) + 1  # with its line break (one past the text for the last line)
        left += not (
            end <= head or (end > len(data) and len(data) <= head) or at >= len(data) - tail
        )
        at = end
    return left


@given(_texts, st.integers(MIN_MODEL_OUTPUT_BYTES, 4000))
def test_a_text_is_whole_or_a_head_one_line_and_a_tail_within_the_budget(
    text: str, budget: int
) -> None:
    out = cut_to_budget(text, budget)
    data = text.encode()
    if len(data) <= budget:
        assert out.text == text and not out.is_cut
        return
    assert len(out.text.encode()) <= budget
    (match,) = list(_MARKER.finditer(out.text))
    shown_head, tail = out.text[: match.start()].encode(), out.text[match.end() :].encode()
    head = len(data) - len(tail) - out.bytes_left_out
    assert out.bytes_left_out > 0 and data.endswith(tail)
    assert shown_head in (data[:head], data[:head] + b"\n")  # a line break of ours, or none
    assert int(match.group(2).replace(",", "")) == out.bytes_left_out
    assert int(match.group(1).replace(",", "")) == out.lines_left_out
    assert out.lines_left_out == _not_in_full(data, head, len(tail))


def test_lines_are_cut_at_their_ends_and_the_line_says_what_was_left_out() -> None:
    text, sections = success_text([f"line {i}" for i in range(10_000)], [1, 2], True)
    out = cut_to_budget(text, 2000, sections=sections, keep=lambda _whole: "resource x://y")
    head, _, tail = out.text.split("\n", 1)[1].partition("\n[... ")
    assert head.startswith("line 0\nline 1\n") and tail.endswith("line 9999\nresult:\n[1,2]")
    last_in_head = int(head.rsplit("line ", 1)[1])
    first_in_tail = int(tail.split("]\nline ", 1)[1].split("\n", 1)[0])
    assert out.lines_left_out == first_in_tail - last_in_head - 1  # whole lines, none cut
    assert out.parts_cut == ("logs",) and out.where == "resource x://y"
    assert tail.startswith(
        f"{out.lines_left_out:,} lines ({out.bytes_left_out:,} bytes) of the logs left out "
        "here; the whole text: resource x://y]\n"
    )


def test_a_cut_result_is_said_to_be_cut() -> None:
    text, sections = success_text(["start"], list(range(5000)), True)
    out = cut_to_budget(text, 1500, sections=sections)
    assert out.parts_cut == ("result",)
    assert "of the result left out here; the result is cut: what is shown of it is not whole " in (
        out.text
    )
    assert out.text.endswith("4998,4999]") and "print or return less to see it]" in out.text
    failed, parts = failure_text("exception", "ValueError: " + "x" * 5000, ["before"])
    assert cut_to_budget(failed, 1500, sections=parts).parts_cut == ("failure",)


def test_keep_is_asked_only_for_a_text_that_is_cut() -> None:
    asked: list[str] = []

    def keep(whole: str) -> None:
        asked.append(whole)

    cut_to_budget("short", 2000, keep=keep)
    assert asked == []
    cut_to_budget("y" * 3000, 2000, keep=keep)
    assert asked == ["y" * 3000]


def test_the_line_reads_in_words() -> None:
    assert (
        left_out_line(1, 5)
        == "[... 1 line (5 bytes) left out here; print or return less to see it]"
    )
    assert left_out_line(12_345, 1_234_567, ("logs", "result"), "file /tmp/x") == (
        "[... 12,345 lines (1,234,567 bytes) of the logs and result left out here; the result is "
        "cut: what is shown of it is not whole JSON; the whole text: file /tmp/x]"
    )
