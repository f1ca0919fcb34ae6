"""The kept outputs of ``dsh-code mcp``: bounded in count and bytes, read by their URI only."""

from __future__ import annotations

from host.mcp._outputs import OUTPUT_URI_PREFIX, KeptOutputs


def test_outputs_are_kept_by_unguessable_uris_and_the_oldest_go_first() -> None:
    outputs = KeptOutputs(max_outputs=2, max_bytes=100)
    first, second = outputs.keep("a" * 40), outputs.keep("b" * 40)
    assert first is not None and second is not None and first != second
    assert first.startswith(OUTPUT_URI_PREFIX) and len(first) > len(OUTPUT_URI_PREFIX) + 20
    assert outputs.read(first) == "a" * 40
    third = outputs.keep("c" * 10)  # a third text: the first goes (count)
    assert outputs.read(first) is None and outputs.read(second) == "b" * 40
    fourth = outputs.keep("é" * 30)  # 60 bytes: 40 + 10 + 60 > 100, the second goes (bytes)
    assert outputs.read(second) is None
    assert third is not None and fourth is not None
    assert outputs.read(third) == "c" * 10 and outputs.read(fourth) == "é" * 30


def test_a_text_larger_than_all_that_may_be_kept_is_not_kept() -> None:
    outputs = KeptOutputs(max_outputs=4, max_bytes=100)
    kept = outputs.keep("x" * 50)
    assert outputs.keep("y" * 101) is None
    assert kept is not None and outputs.read(kept) == "x" * 50  # nothing was dropped for it
    assert KeptOutputs(max_outputs=0, max_bytes=100).keep("z") is None
