"""Bare JSON Schema: the corpus, the differential test against jsonschema, bounds and loosening."""

from __future__ import annotations

import copy
import json
import threading
from typing import Any

import jsonschema
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from host.tools import (
    Object,
    SchemaError,
    SchemaLimits,
    ToolDefinitionError,
    define_tool,
    from_json_schema,
    to_json_schema,
    validate,
)

from .corpus import cases, example, mcp_tools, wrong
from .strategies import json_schemas, json_values


def _noop(args: Any, ctx: Any) -> None:
    return None


def _path_of(message: str | None) -> str:
    assert message is not None
    return message.split(":", 1)[0]


MCP = mcp_tools()


def test_the_corpus_has_the_real_servers_tools() -> None:
    assert len(MCP) == 62
    assert {tool["name"].split("__")[0] for tool in MCP} == {
        "everything",
        "filesystem",
        "github",
        "memory",
    }


@pytest.mark.parametrize("tool", MCP, ids=[tool["name"] for tool in MCP])
def test_every_mcp_tool_registers_verbatim_and_validates(tool: dict[str, Any]) -> None:
    params = tool["inputSchema"]
    output = {"schema": tool["outputSchema"]} if "outputSchema" in tool else None
    definition = define_tool(
        name=tool["name"],
        description=tool.get("description", ""),
        parameters=params,
        output=output,
        execute=_noop,
    )
    assert to_json_schema(definition.parameters) == params  # what the model reads: as given
    if output is not None:
        assert definition.output is not None
        assert to_json_schema(definition.output.schema) == tool["outputSchema"]
    reference = jsonschema.validators.validator_for(params)(params)
    good = example(params, params)
    assert reference.is_valid(good), good
    assert validate(definition.parameters, good) is None
    for key in params.get("required", []):
        bad = {k: v for k, v in good.items() if k != key}
        assert not reference.is_valid(bad)
        assert validate(definition.parameters, bad) == f"$.{key}: missing required property"
    for key, prop in params.get("properties", {}).items():
        if "type" in prop:
            bad = {**good, key: wrong(prop)}
            assert not reference.is_valid(bad)
            assert _path_of(validate(definition.parameters, bad)) == f"$.{key}"
    if params.get("additionalProperties") is False:
        bad = {**good, "zz_unexpected": 1}
        assert validate(definition.parameters, bad) == (
            "$.zz_unexpected: unexpected property (not allowed here)"
        )


@pytest.mark.parametrize("corpus", ["pydantic_models", "openapi"])
def test_pydantic_and_openapi_schemas_validate_their_examples(corpus: str) -> None:
    for name, case in cases(corpus).items():
        node = from_json_schema(case["schema"])
        assert to_json_schema(node) == case["schema"]
        # pydantic writes standard 2020-12; OpenAPI's `nullable` and draft-04 bounds are honoured
        reference = jsonschema.Draft202012Validator(case["schema"]) if corpus[0] == "p" else None
        for value in case["valid"]:
            assert validate(node, value) is None, (name, value)
            assert reference is None or reference.is_valid(value)
        for value, path in case["invalid"]:
            assert _path_of(validate(node, value)) == path, (name, value)
            assert reference is None or not reference.is_valid(value)


def _reference_is_valid(source: Any, value: Any) -> bool | None:
    try:
        return bool(jsonschema.Draft202012Validator(source).is_valid(value))
    except RecursionError:  # pragma: no cover - the reference's own limit
        return None


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(json_schemas, st.data())
def test_agrees_with_the_jsonschema_library(source: Any, data: st.DataObject) -> None:
    jsonschema.Draft202012Validator.check_schema(source)
    node = from_json_schema(source)
    value = data.draw(json_values)
    expected = _reference_is_valid(source, value)
    if expected is None:
        return
    error = validate(node, value)
    assert (error is None) == expected, (source, value, error)


@given(json_values)
def test_true_and_empty_schemas_accept_any_json(value: Any) -> None:
    assert validate(from_json_schema(True), value) is None
    assert validate(from_json_schema({}), value) is None
    assert validate(from_json_schema(False), value) is not None


def _nested(depth: int) -> Any:
    value: Any = {}
    for _ in range(depth):
        value = {"a": [value]}
    return value


def test_a_schema_too_deep_is_refused_before_compiling() -> None:
    with pytest.raises(
        SchemaError, match=r"at #(/properties/a/items){21}/properties: nested deeper than 64 levels"
    ):
        from_json_schema(_schema_chain(40))
    node = from_json_schema(_schema_chain(40), limits=SchemaLimits(max_schema_depth=200))
    assert isinstance(node, Object)


def _schema_chain(depth: int) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "string"}
    for _ in range(depth):
        schema = {"type": "object", "properties": {"a": {"type": "array", "items": schema}}}
    return schema


def test_a_value_too_deep_for_a_recursive_schema_is_invalid_not_a_crash() -> None:
    tree = {
        "$defs": {
            "T": {
                "type": "object",
                "properties": {"a": {"type": "array", "items": {"$ref": "#/$defs/T"}}},
            }
        },
        "$ref": "#/$defs/T",
    }
    node = from_json_schema(tree)
    assert validate(node, _nested(100)) is None
    deep = _nested(200_000)  # the compiled validator recurses: it must never see this
    message = validate(node, deep)
    assert message is not None
    assert message.endswith("expected a value nested at most 512 levels deep")
    done: list[str | None] = []
    worker = threading.Thread(target=lambda: done.append(validate(node, deep)))
    worker.start()
    worker.join()
    assert done == [message]


def test_non_json_values_and_cycles_are_invalid() -> None:
    node = from_json_schema({"type": "object"})
    cycle: dict[str, Any] = {}
    cycle["self"] = cycle
    assert validate(node, cycle) == "$.self: expected a JSON value, got a reference cycle"
    assert validate(node, {"a": (1, 2)}) == "$.a: expected a JSON value, got a non-JSON tuple"
    assert validate(node, {"a": float("nan")}) == "$.a: expected a finite number, got nan"
    assert validate(node, {1: 2}) == "$: expected an object with string keys, got key 1"
    assert validate(from_json_schema({"type": "string"}), "\ud800") == (
        "$: expected a JSON value, got a string with a lone surrogate"
    )


def test_messages_are_bounded() -> None:
    node = from_json_schema({"enum": ["x" * 50] * 40}, limits=SchemaLimits(max_message_chars=100))
    message = validate(node, 1)
    assert message is not None
    assert len(message) == 100
    assert message.endswith("…")


@pytest.mark.parametrize(
    ("source", "message"),
    [
        (
            {"$schema": "https://example.com/mine"},
            r"at #/\$schema: unsupported \$schema 'https://example.com/mine'",
        ),
        (
            {"$ref": "https://example.com/s.json"},
            r"at #/\$ref: cannot resolve Resource 'https://example.com/s.json': only references inside the document are followed",
        ),
        ({"minimum": float("inf")}, r"at #/minimum: inf is not a JSON number"),
        (
            {"properties": {"a": {"type": "object", 3: {}}}},
            r"at #/properties/a: an object key must be a string, got 3",
        ),
    ],
)
def test_invalid_schemas_name_the_pointer(source: Any, message: str) -> None:
    with pytest.raises(SchemaError, match=message):
        from_json_schema(source)


def test_define_tool_names_the_tool_and_where() -> None:
    with pytest.raises(
        ToolDefinitionError,
        match=r"^t: parameters: invalid JSON Schema at #/properties/n/minimum: \"1\" is not of type \"number\"$",
    ):
        define_tool(
            name="t",
            description="",
            parameters={"type": "object", "properties": {"n": {"minimum": "1"}}},
            execute=_noop,
        )


def test_draft_07_and_openapi_forms_are_honoured() -> None:
    draft7 = {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "items": [{"type": "string"}],
        "additionalItems": False,
    }
    assert validate(from_json_schema(draft7), ["a"]) is None
    assert validate(from_json_schema(draft7), ["a", "b"]) is not None
    nullable = {"type": "string", "nullable": True, "enum": ["a"]}
    assert validate(from_json_schema(nullable), None) is None
    assert to_json_schema(from_json_schema(nullable)) == nullable  # the model reads it as given
    bounds = {"minimum": 1, "exclusiveMinimum": True}
    assert validate(from_json_schema(bounds), 1) == "$: expected number > 1, got integer 1"


def test_formats_are_annotations() -> None:
    node = from_json_schema({"type": "string", "format": "email"})
    assert validate(node, "not an email") is None


def test_the_source_is_never_shared_with_callers() -> None:
    source: dict[str, Any] = {"type": "object", "properties": {"a": {"type": "string"}}}
    node = from_json_schema(source)
    emitted = to_json_schema(node)
    emitted["properties"]["a"]["type"] = "integer"
    source["properties"]["a"]["type"] = "integer"
    assert to_json_schema(node) == {"type": "object", "properties": {"a": {"type": "string"}}}
    assert validate(node, {"a": "x"}) is None


def test_loose_cuts_only_what_is_invalid() -> None:
    source = {"type": "object", "properties": {"a": {"pattern": "("}, "b": {"type": "integer"}}}
    node = from_json_schema(copy.deepcopy(source), loose=True)
    assert node.bare is not None
    assert node.bare.loosened == (
        'invalid JSON Schema at #/properties/a/pattern: "(" is not a "regex"',
    )
    assert validate(node, {"a": 1, "b": 2}) is None
    assert validate(node, {"b": "x"}) == '$.b: expected integer, got string "x"'
    assert json.dumps(to_json_schema(node)) == json.dumps(
        {"type": "object", "properties": {"a": {}, "b": {"type": "integer"}}}
    )
