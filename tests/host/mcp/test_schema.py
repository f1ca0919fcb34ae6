"""MCP JSON Schemas through the shared path: kept as given, invalid parts cut, never stricter."""

from __future__ import annotations

from typing import Any

import jsonschema
import pytest

from host.mcp import loosen_schema
from host.tools import from_json_schema, validate

PYDANTIC_STYLE: dict[str, Any] = {
    "$defs": {
        "Point": {
            "title": "Point",
            "type": "object",
            "properties": {"x": {"type": "integer"}, "y": {"type": "integer"}},
            "required": ["x", "y"],
        },
        "Tree": {
            "type": "object",
            "properties": {"children": {"type": "array", "items": {"$ref": "#/$defs/Tree"}}},
        },
    },
    "title": "args",
    "type": "object",
    "properties": {
        "where": {"$ref": "#/$defs/Point"},
        "label": {"anyOf": [{"type": "string"}, {"type": "null"}], "default": None},
        "tags": {"type": "array", "items": {"type": "string"}, "uniqueItems": True},
        "email": {"type": "string", "format": "email"},
        "either": {"anyOf": [{"type": "integer"}, {"type": "number"}]},
        "tree": {"$ref": "#/$defs/Tree"},
        "wrapped": {"allOf": [{"$ref": "#/$defs/Point"}], "description": "a point"},
        "extra": {"type": "object", "patternProperties": {"^x": {"type": "string"}}},
    },
    "required": ["where"],
}


def test_a_valid_schema_is_kept_as_given() -> None:
    assert loosen_schema(PYDANTIC_STYLE, top_object=True) == PYDANTIC_STYLE
    node = from_json_schema(loosen_schema(PYDANTIC_STYLE, top_object=True))
    assert validate(node, {"where": {"x": 1, "y": 2}}) is None
    assert validate(node, {"where": {"x": "no", "y": 2}}) == (
        '$.where.x: expected integer, got string "no"'
    )
    assert validate(node, {"where": {"x": 1, "y": 2}, "tags": ["a", "a"]}) == (
        "$.tags: expected array of unique items, got array"
    )


@pytest.mark.parametrize(
    "value",
    [
        {"where": {"x": 1, "y": 2}},
        {"where": {"x": 1, "y": 2}, "label": None, "either": 3, "tags": ["a"]},
        {"where": {"x": 1, "y": 2}, "label": "hi", "either": 2.5, "email": "a@b.c"},
        {"where": {"x": 0, "y": 0}, "tree": {"children": [{"children": []}]}},
        {"where": {"x": 0, "y": 0}, "wrapped": {"x": 1, "y": 1}, "extra": {"xa": "s"}},
    ],
)
def test_every_value_the_server_accepts_passes(value: dict[str, Any]) -> None:
    jsonschema.validate(value, PYDANTIC_STYLE)  # the server's view
    assert validate(from_json_schema(loosen_schema(PYDANTIC_STYLE, top_object=True)), value) is None


def test_a_non_object_root_becomes_an_open_object() -> None:
    assert loosen_schema({"type": "string"}, top_object=True) == {
        "type": "object",
        "properties": {},
    }
    assert loosen_schema({}, top_object=True) == {"type": "object", "properties": {}}
    assert loosen_schema(3, top_object=True) == {"type": "object", "properties": {}}


def test_only_what_is_invalid_is_cut() -> None:
    bad = {
        "type": "object",
        "properties": {"a": {"type": "string", "pattern": "("}, "b": {"type": "integer"}},
    }
    out = loosen_schema(bad, top_object=True)
    assert out == {"type": "object", "properties": {"a": {}, "b": {"type": "integer"}}}
    unresolved = {"type": "object", "properties": {"a": {"$ref": "#/$defs/Missing"}}}
    assert loosen_schema(unresolved)["properties"]["a"] == {}


def test_a_cut_under_not_or_one_of_gives_up_the_whole_schema() -> None:
    # Cutting inside `not` would reject more: the whole schema goes instead.
    bad = {"type": "object", "not": {"properties": {"a": {"pattern": "("}}}}
    assert loosen_schema(bad) == {}
    assert validate(from_json_schema(bad, loose=True), {"a": "x"}) is None
