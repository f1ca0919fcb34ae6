"""Validation messages for bare JSON Schema: path, expectation, value; bounded."""

from __future__ import annotations

from typing import Any

import pytest

from host.tools import from_json_schema, validate
from host.tools._explain import describe, format_parts, limit_text


@pytest.mark.parametrize(
    ("source", "value", "message"),
    [
        ({"type": ["integer", "null"]}, "x", '$: expected integer or null, got string "x"'),
        ({"enum": [1, "a"]}, 2, '$: expected one of [1, "a"], got integer 2'),
        ({"const": "x"}, "y", '$: expected "x", got string "y"'),
        ({"exclusiveMaximum": 3}, 3, "$: expected number < 3, got integer 3"),
        ({"maxLength": 2}, "abc", '$: expected string of at most 2 characters, got string "abc"'),
        ({"minItems": 2}, [1], "$: expected array of at least 2 items, got array"),
        ({"multipleOf": 2}, 3, "$: expected multiple of 2, got integer 3"),
        ({"required": ["a"]}, {}, "$.a: missing required property"),
        ({"dependentRequired": {"a": ["b"]}}, {"a": 1}, "$.b: missing required property"),
        (
            {"properties": {"a": {}}, "additionalProperties": False},
            {"b": 1, "c": 2},
            "$.b: unexpected property (not allowed here) (and 1 more)",
        ),
        (
            {"propertyNames": {"maxLength": 2}},
            {"abc": 1},
            '$: property name "abc" is not allowed: expected string of at most 2 characters',
        ),
        (
            {"not": {"type": "string"}},
            "s",
            '$: expected a value not matching {"type": "string"}, got string "s"',
        ),
        ({"minProperties": 1}, {}, "$: expected object with at least 1 properties, got object"),
        (
            {"contains": {"type": "string"}},
            [1],
            "$: expected array with an item matching the 'contains' schema, got array",
        ),
        (
            {"oneOf": [{"type": "integer"}, {"minimum": 0}]},
            3,
            "$: expected a value matching exactly one of 2 alternatives, but alternatives 1, 2 all matched",
        ),
        (
            {"anyOf": [{"type": "integer"}, {"type": "string"}]},
            [],
            "$: expected string or integer, got array",
        ),
        (
            {
                "properties": {
                    "s": {
                        "oneOf": [
                            {
                                "properties": {"k": {"const": "a"}, "v": {"type": "integer"}},
                                "required": ["k"],
                            },
                            {"properties": {"k": {"const": "b"}}, "required": ["k"]},
                        ]
                    }
                }
            },
            {"s": {"k": "a", "v": "x"}},
            '$.s: expected a value matching exactly one of 2 alternatives, none did (closest, alternative 1: $.s.v: expected integer, got string "x")',
        ),
    ],
)
def test_every_keyword_says_where_what_and_what_was_given(
    source: Any, value: Any, message: str
) -> None:
    assert validate(from_json_schema(source), value) == message


def test_helpers() -> None:
    assert format_parts(["items", 3, "odd key"]) == '$.items[3]["odd key"]'
    long = format_parts(["k"] * 200)
    assert len(long) == 201 and "…" in long
    assert limit_text("abcdef", 4) == "abc…"
    assert describe(2**200) == "integer a large integer"
    assert describe("x" * 50) == 'string "' + "x" * 40 + '…"'
