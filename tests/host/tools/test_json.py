"""freeze, thaw and canonical_json: read-only copies and canonical text at any depth."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from host.tools import FrozenDict, FrozenList, canonical_json, freeze, thaw
from host.tools._json import _canonical_slow

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=25,
)


def deep_list(depth: int) -> list[Any]:
    value: list[Any] = []
    for _ in range(depth):
        value = [value]
    return value


@given(json_values)
def test_freeze_thaw_round_trips(value: Any) -> None:
    frozen = freeze(value)
    assert frozen == value
    thawed = thaw(frozen)
    assert thawed == value
    assert json.dumps(thawed) == json.dumps(value)


@given(json_values, st.booleans())
def test_iterative_encoder_matches_json_dumps(value: Any, sort_keys: bool) -> None:
    expected = json.dumps(value, sort_keys=sort_keys, separators=(",", ":"), ensure_ascii=False)
    assert _canonical_slow(value, sort_keys) == expected
    assert canonical_json(value, sort_keys=sort_keys) == expected


def test_frozen_containers_refuse_mutation() -> None:
    frozen = freeze({"a": [1, {"b": 2}]})
    assert isinstance(frozen, FrozenDict)
    assert isinstance(frozen["a"], FrozenList)
    with pytest.raises(TypeError):
        frozen["x"] = 1
    with pytest.raises(TypeError):
        frozen["a"].append(3)
    with pytest.raises(TypeError):
        frozen["a"][1]["b"] = 3
    with pytest.raises(TypeError):
        frozen.update({})
    with pytest.raises(TypeError):
        del frozen["a"]


def test_freeze_copies_so_the_source_can_change() -> None:
    source = {"a": [1]}
    frozen = freeze(source)
    source["a"].append(2)
    assert frozen == {"a": [1]}


def test_thaw_gives_plain_containers() -> None:
    thawed = thaw(freeze({"a": [{"b": []}]}))
    assert type(thawed) is dict
    assert type(thawed["a"]) is list
    assert type(thawed["a"][0]) is dict


def test_deep_values_do_not_recurse() -> None:
    value = deep_list(100_000)
    frozen = freeze(value)
    assert thaw(frozen) is not None
    assert canonical_json(value) == "[" * 100_001 + "]" * 100_001


def test_cycles_terminate() -> None:
    value: list[Any] = [1]
    value.append(value)
    frozen = freeze(value)
    assert frozen[1] is frozen
    assert canonical_json(value) == '[1,"<cycle>"]'


def test_key_order_does_not_change_canonical_text() -> None:
    assert canonical_json({"b": 1, "a": {"d": 1, "c": 2}}) == canonical_json(
        {"a": {"c": 2, "d": 1}, "b": 1}
    )
    assert canonical_json({"b": 1, "a": 2}, sort_keys=False) == '{"b":1,"a":2}'
