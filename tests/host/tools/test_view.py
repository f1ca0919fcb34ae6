"""The typed view of a bare JSON Schema: what a node made by from_json_schema says of it."""

from __future__ import annotations

from host.tools import Integer, Json, Object, OneOf, String, from_json_schema


def test_the_view_types_what_it_can() -> None:
    node = from_json_schema(
        {
            "type": "object",
            "title": "Args",
            "properties": {
                "q": {"type": "string", "minLength": 1, "format": "uri", "description": "Q"},
                "n": {"type": "integer", "minimum": 0, "multipleOf": 2},
                "either": {"anyOf": [{"type": "string"}, {"type": "null"}]},
                "ref": {"$ref": "#/$defs/X"},
            },
            "required": ["q", "missing"],
            "$defs": {"X": {"type": "string"}},
        }
    )
    assert isinstance(node, Object)
    assert node.title == "Args"
    assert node.required_names == {"q", "missing"}
    props = node.property_map
    assert props["q"] == String(required=True, min_length=1, format="uri", description="Q")
    assert props["n"] == Integer(minimum=0, multiple_of=2)
    assert isinstance(props["either"], OneOf)
    assert isinstance(props["ref"], Json)  # references are not followed by the view
    assert props["missing"] == Json(required=True)
    assert props["q"].bare is None  # only the root validates: children are a view


def test_mixed_enums_and_type_lists() -> None:
    assert isinstance(from_json_schema({"enum": ["a", 1]}), Json)
    assert isinstance(from_json_schema({"enum": ["a", "b"]}), String)
    assert isinstance(from_json_schema({"type": ["string", "null"]}), OneOf)
    assert isinstance(from_json_schema({"type": ["string"]}), String)
