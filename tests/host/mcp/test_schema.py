"""MCP JSON Schemas loosened into the registry's subset: never stricter than the original."""

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


def test_refs_unions_and_unknown_keywords_become_the_registry_subset() -> None:
    out = loosen_schema(PYDANTIC_STYLE, top_object=True)
    node = from_json_schema(out)  # raises if anything unsupported is left
    props = out["properties"]
    assert props["where"]["properties"]["x"] == {"type": "integer"}
    assert props["where"]["required"] == ["x", "y"]
    assert props["label"]["oneOf"] == [{"type": "string"}, {"type": "null"}]
    assert "uniqueItems" not in props["tags"] and props["tags"]["items"] == {"type": "string"}
    assert props["either"] == {}  # overlapping options: any JSON, never a stricter oneOf
    assert props["tree"]["properties"]["children"]["items"] == {}  # the recursion is cut
    assert props["wrapped"]["description"] == "a point"
    assert props["wrapped"]["properties"]["y"] == {"type": "integer"}
    assert "patternProperties" not in props["extra"]
    assert validate(node, {"where": {"x": 1, "y": 2}}) is None
    assert validate(node, {"where": {"x": "no", "y": 2}}) is not None


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


def test_a_non_object_or_unreadable_root_becomes_an_open_object() -> None:
    assert loosen_schema({"type": "string"}, top_object=True) == {
        "type": "object",
        "properties": {},
    }
    assert loosen_schema({}, top_object=True) == {"type": "object", "properties": {}}
    weird = {"type": "object", "properties": {"a": {"enum": [1, "x"]}}}
    assert loosen_schema(weird, top_object=True)["properties"]["a"] == {}
