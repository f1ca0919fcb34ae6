"""The schema model: the DSL, JSON Schema emission, and JSON Schema import."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given

from host.tools import (
    Json,
    Object,
    OneOf,
    SchemaError,
    String,
    from_json_schema,
    schema,
    to_json_schema,
)

from .strategies import nodes


def test_dsl_emits_json_schema() -> None:
    node = schema.object(
        {
            "path": schema.string(required=True, description="Absolute path"),
            "mode": schema.string(enum=["r", "w"]),
            "kind": schema.string(const="file"),
            "limit": schema.integer(minimum=1, default=10),
            "ratio": schema.number(exclusive_maximum=1),
            "tags": schema.array(schema.string(), min_items=1),
            "extra": schema.json(),
            "either": schema.one_of(schema.boolean(), schema.null()),
        },
        additional_properties=False,
    )
    assert to_json_schema(node) == {
        "type": "object",
        "properties": {
            "path": {"type": "string", "description": "Absolute path"},
            "mode": {"type": "string", "enum": ["r", "w"]},
            "kind": {"type": "string", "const": "file"},
            "limit": {"type": "integer", "minimum": 1, "default": 10},
            "ratio": {"type": "number", "exclusiveMaximum": 1},
            "tags": {"type": "array", "items": {"type": "string"}, "minItems": 1},
            "extra": {},
            "either": {"oneOf": [{"type": "boolean"}, {"type": "null"}]},
        },
        "required": ["path"],
        "additionalProperties": False,
    }


def test_explicit_objects_must_declare_additional_properties() -> None:
    with pytest.raises(TypeError):
        schema.object({"a": schema.string()})  # type: ignore[call-arg]


def test_implicit_root_takes_only_its_properties() -> None:
    assert schema.root({"a": schema.string()}).additional_properties is False


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda: schema.string(enum=[1]), "a string enum must list strings"),  # type: ignore[list-item]
        (lambda: schema.string(const=1), "a string const must be a string"),
        (lambda: schema.integer(enum=[1.5]), "an integer enum must list integers"),  # type: ignore[list-item]
        (lambda: schema.integer(enum=[True]), "an integer enum must list integers"),
        (lambda: schema.number(const=float("nan")), "a number const must be a finite number"),
        (
            lambda: schema.number(minimum=float("inf")),
            "number: bounds must be finite numbers, got inf",
        ),
        (lambda: schema.number(multiple_of=0), "number: multiple_of must be a number > 0, got 0"),
        (lambda: schema.boolean(enum=[0]), "a boolean enum must list booleans"),  # type: ignore[list-item]
        (lambda: schema.string(pattern="("), r"invalid pattern '\(': missing \)"),
        (schema.one_of, "one_of needs at least one schema node"),
        (lambda: schema.array("string"), "array items must be a schema node"),  # type: ignore[arg-type]
        (
            lambda: schema.object({"a": "string"}, additional_properties=True),  # type: ignore[dict-item]
            "object property 'a' must map a str to a schema node",
        ),
    ],
)
def test_malformed_nodes_are_rejected(build: Any, message: str) -> None:
    with pytest.raises(SchemaError, match=message):
        build()


@given(nodes)
def test_json_schema_round_trips(node: Any) -> None:
    emitted = to_json_schema(node)
    assert to_json_schema(from_json_schema(emitted)) == emitted


def test_bare_json_schema_objects_stay_open() -> None:
    node = from_json_schema({"type": "object", "properties": {"a": {"type": "string"}}})
    assert isinstance(node, Object)
    assert node.additional_properties is True


def test_json_schema_import_details() -> None:
    node = from_json_schema({"type": ["string", "null"]})
    assert isinstance(node, OneOf)
    assert isinstance(from_json_schema({"enum": ["a", "b"]}), String)
    assert isinstance(from_json_schema({}), Json)
    needed = from_json_schema({"type": "object", "required": ["x"]})
    assert isinstance(needed, Object)
    assert needed.required_names == {"x"}


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ({"anyOf": []}, r"invalid JSON Schema at #/anyOf: \[\] has less than 1 item"),
        ({"$ref": "#/x"}, r"at #/\$ref: cannot resolve a \$ref: Pointer '/x' does not exist"),
        ({"type": "date"}, r"at #/type: \"date\" is not valid under any of the schemas"),
        (
            {"properties": {"a": {"pattern": "("}}},
            r"at #/properties/a/pattern: \"\(\" is not a \"regex\"",
        ),
        (3, "a JSON Schema is an object or a boolean, got int"),
    ],
)
def test_invalid_json_schema_is_rejected(source: Any, message: str) -> None:
    with pytest.raises(SchemaError, match=message):
        from_json_schema(source)
