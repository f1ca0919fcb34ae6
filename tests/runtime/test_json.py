"""The lossless-JSON rule: accepted values, rejected ones, and the path in the message."""

from __future__ import annotations

import math
from collections import OrderedDict
from enum import IntEnum
from typing import Any

import msgspec
from hypothesis import given
from hypothesis import strategies as st

from runtime import json_problem
from runtime._json import MAX_DEPTH, json_values_bound, nests_deeper_than

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**200), max_value=2**200)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(), inner, max_size=5),
    max_leaves=30,
)


@given(json_values)
def test_json_values_pass_and_round_trip_through_msgspec(value: Any) -> None:
    assert json_problem(value) is None
    assert msgspec.json.decode(msgspec.json.encode(value)) == value


class _Color(IntEnum):
    RED = 1


def _cycle() -> list[Any]:
    xs: list[Any] = [1]
    xs.append({"again": xs})
    return xs


async def _coro() -> None:
    return None


def test_problems_say_what_and_where() -> None:
    assert json_problem({"items": [1, 2, 3, (1, 2)]}) == "tuple at $.items[3]"
    assert json_problem([{1, 2}]) == "set at $[0]"
    assert json_problem({"b": b"x"}) == "bytes at $.b"
    assert json_problem([math.nan]) == "non-finite float nan at $[0]"
    assert json_problem({"x": math.inf}) == "non-finite float inf at $.x"
    assert json_problem({1: "a"}) == "a int key 1 at $"
    assert json_problem({"a b": object()}) == "object at $['a b']"
    assert "a cycle at $[1].again" in (json_problem(_cycle()) or "")
    assert "subclass of int" in (json_problem([_Color.RED]) or "")
    assert "subclass of dict" in (json_problem(OrderedDict(a=1)) or "")
    coro = _coro()
    assert "forget `await`" in (json_problem({"r": coro}) or "")
    coro.close()


def test_shared_but_acyclic_values_are_fine() -> None:
    shared = [1, 2]
    assert json_problem({"a": shared, "b": shared}) is None


def test_deep_nesting_is_rejected_without_recursion() -> None:
    deep: list[Any] = []
    for _ in range(100_000):
        deep = [deep]
    assert f"deeper than {MAX_DEPTH}" in (json_problem(deep) or "")
    ok: list[Any] = []
    for _ in range(MAX_DEPTH - 1):
        ok = [ok]
    assert json_problem(ok) is None


def _count_values(value: Any) -> int:
    """Values and keys ``value`` decodes to (the real count the bound must not go under)."""
    if isinstance(value, dict):
        return 1 + sum(1 + _count_values(v) for v in value.values())
    if isinstance(value, list):
        return 1 + sum(_count_values(v) for v in value)
    return 1


@given(json_values, st.integers(min_value=0, max_value=40))
def test_the_values_bound_never_undercounts_and_strings_do_not_inflate_it(
    value: Any, limit: int
) -> None:
    raw = msgspec.json.encode(value)
    bound = json_values_bound(raw, limit)
    real = _count_values(value)
    if bound <= limit:
        assert real <= limit  # under the bound: the decoded values are too
    else:
        assert bound <= 2 * real + 1  # over it: counted outside strings, near the real count


def test_separators_inside_strings_count_only_when_the_bound_is_near() -> None:
    raw = msgspec.json.encode(['a,b:c[d{e\\"' * 1000])
    assert json_values_bound(raw, 10) <= 3
    assert json_values_bound(msgspec.json.encode([{}] * 1000), 10) > 1000


def _depth(value: Any) -> int:
    if isinstance(value, dict):
        return 1 + max((_depth(v) for v in value.values()), default=0)
    if isinstance(value, list):
        return 1 + max((_depth(v) for v in value), default=0)
    return 0


_bracket_text = st.text(alphabet='[]{}"\\,:ab', max_size=8)
bracketed_values = st.recursive(
    st.none() | st.integers() | _bracket_text,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_bracket_text, inner, max_size=4),
    max_leaves=40,
)


@given(bracketed_values, st.integers(min_value=0, max_value=8))
def test_the_nesting_check_agrees_with_the_value_whatever_its_strings_hold(
    value: Any, limit: int
) -> None:
    assert nests_deeper_than(msgspec.json.encode(value), limit) == (_depth(value) > limit)


def test_the_nesting_check_finds_one_deep_branch_among_many_flat_ones() -> None:
    deep = "[" * MAX_DEPTH + "]" * MAX_DEPTH
    raw = ("[" + '{"[":"[[["},[],' * 10_000 + deep + "]").encode()  # MAX_DEPTH + 1 deep
    assert nests_deeper_than(raw, MAX_DEPTH)
    assert not nests_deeper_than(raw, MAX_DEPTH + 1)
