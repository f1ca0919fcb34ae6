"""The validator: messages with JSON paths, deep values, and a differential test vs jsonschema."""

from __future__ import annotations

import tracemalloc
from typing import Any

import jsonschema
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from host.tools import Node, schema, to_json_schema, validate

from .strategies import json_values, nodes, values_for


def _strict_integer(_checker: Any, instance: Any) -> bool:
    return isinstance(instance, int) and not isinstance(instance, bool)


_Validator = jsonschema.validators.extend(
    jsonschema.Draft202012Validator,
    type_checker=jsonschema.Draft202012Validator.TYPE_CHECKER.redefine("integer", _strict_integer),
)


@settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow])
@given(st.data(), nodes)
def test_agrees_with_jsonschema(data: st.DataObject, node: Node) -> None:
    value = data.draw(values_for(node) | json_values)
    reference = _Validator(to_json_schema(node)).is_valid(value)
    error = validate(node, value)
    assert (error is None) == reference, error


def test_messages_name_the_path_and_the_expectation() -> None:
    node = schema.object(
        {
            "items": schema.array(
                schema.object({"n": schema.integer(required=True)}, additional_properties=False)
            ),
            "odd key": schema.string(),
        },
        additional_properties=False,
    )
    assert validate(node, {"items": [{"n": 1}, {"n": "x"}]}) == (
        '$.items[1].n: expected integer, got string "x"'
    )
    assert validate(node, {"items": [{}]}) == "$.items[0].n: missing required property"
    assert validate(node, {"odd key": 3}) == '$["odd key"]: expected string, got integer 3'
    assert validate(node, {"zz": 1}) == "$.zz: unexpected property (not allowed here)"
    assert validate(node, []) == "$: expected object, got array"


def test_enum_and_const_messages() -> None:
    assert validate(schema.string(enum=["a", "b"]), "c") == (
        '$: expected one of ["a", "b"], got string "c"'
    )
    assert validate(schema.integer(const=3), 4) == "$: expected 3, got integer 4"


def test_bool_is_not_a_number_and_floats_are_not_integers() -> None:
    assert validate(schema.integer(), True) is not None
    assert validate(schema.number(), False) is not None
    assert validate(schema.integer(), 1.0) is not None
    assert validate(schema.number(), 1) is None


def test_non_json_values_are_rejected() -> None:
    assert validate(schema.json(), (1, 2)) == "$: expected a JSON value, got a non-JSON tuple"
    assert validate(schema.json(), float("nan")) is not None
    assert validate(schema.json(), {1: "a"}) is not None
    assert validate(schema.number(), float("inf")) is not None


def test_cycles_are_rejected() -> None:
    value: list[Any] = []
    value.append(value)
    assert validate(schema.json(), value) == "$[0]: expected a JSON value, got a reference cycle"


def test_shared_subvalues_are_not_cycles() -> None:
    shared = [1]
    assert validate(schema.json(), [shared, shared]) is None


def test_one_of_exactly_one() -> None:
    node = schema.one_of(schema.number(), schema.integer())
    assert validate(node, 1.5) is None
    assert validate(node, 1) == "$: expected exactly one of (number | integer), 2 matched"
    assert validate(node, "x") == "$: expected exactly one of (number | integer), none matched"


def _deep(depth: int, leaf: Any = None) -> Any:
    value = leaf
    for index in range(depth):
        value = {"k": value} if index % 2 else [value]
    return value


def test_a_value_100000_levels_deep_is_validated_with_bounded_memory() -> None:
    value = _deep(100_000)
    tracemalloc.start()
    try:
        assert validate(schema.json(), value) is None
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 64 * 1024 * 1024


def test_a_value_100000_levels_deep_is_rejected() -> None:
    bad = _deep(100_000, leaf=float("nan"))
    error = validate(schema.object({}, additional_properties=True), bad)
    assert error is not None
    assert error.startswith("$.k[0].k[0]")
    assert error.endswith("expected finite number, got number nan")
    shallow = schema.object({"k": schema.array(schema.integer())}, additional_properties=True)
    assert validate(shallow, _deep(100_000)) == "$.k[0]: expected integer, got object"


@pytest.mark.parametrize("depth", [1_000, 100_000])
def test_deep_one_of_chain(depth: int) -> None:
    node = schema.array(schema.one_of(schema.array(), schema.string()))
    assert validate(node, _deep_list(depth)) is None


def _deep_list(depth: int) -> list[Any]:
    value: list[Any] = []
    for _ in range(depth):
        value = [value]
    return value


def test_the_compiled_shortcut_keeps_the_dsl_strict() -> None:
    # jsonschema-rs takes 1.0 as an integer; the DSL does not, and the walk has the last word.
    node = schema.object({"n": schema.integer(), "s": schema.string()}, additional_properties=False)
    assert validate(node, {"n": 1}) is None
    assert validate(node, {"n": 1.0}) == "$.n: expected integer, got number 1.0"
    assert validate(node, {"n": [1.0][0], "s": "x"}) == "$.n: expected integer, got number 1.0"
    big = schema.object({"n": schema.integer(maximum=2**53)}, additional_properties=False)
    assert (
        validate(big, {"n": 2**53 + 1})
        == f"$.n: expected integer <= {2**53}, got integer {2**53 + 1}"
    )
    nested = schema.array(schema.object({"n": schema.integer()}, additional_properties=True))
    assert validate(nested, [{"n": 2.0}]) == "$[0].n: expected integer, got number 2.0"
