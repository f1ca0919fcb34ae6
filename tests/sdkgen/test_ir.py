"""Tests for schema -> type mapping, seen through the Python and TypeScript SDK text."""

from __future__ import annotations

from typing import Any

import pytest

import sdkgen


def sdk(params: Any = None, output: Any = None, name: str = "t") -> str:
    schema = {"type": "object"} if params is None else params
    tool: dict[str, Any] = {"name": name, "inputSchema": schema}
    if output is not None:
        tool["outputSchema"] = output
    return sdkgen.python_sdk([tool])


def param(schema: Any, required: bool = True) -> str:
    """Return the Python annotation generated for one parameter `p`."""
    params = {"type": "object", "properties": {"p": schema}, "required": ["p"] if required else []}
    text = sdk(params)
    line = next(line for line in text.splitlines() if "async def t(" in line)
    return line.split("p: ", 1)[1].split(") ->", 1)[0]


@pytest.mark.parametrize(
    ("schema", "expected"),
    [
        ({"type": "string"}, "str"),
        ({"type": "integer"}, "int"),
        ({"type": "number"}, "float"),
        ({"type": "boolean"}, "bool"),
        ({"type": "null"}, "None"),
        ({}, "JsonValue"),
        (True, "JsonValue"),
        ({"type": "array"}, "list[JsonValue]"),
        ({"type": "array", "items": {"type": "string"}}, "list[str]"),
        ({"type": "object"}, "dict[str, JsonValue]"),
        ({"type": "object", "additionalProperties": {"type": "integer"}}, "dict[str, int]"),
        ({"enum": ["a", "b"]}, 'Literal["a", "b"]'),
        ({"enum": ["a", 1, True, None]}, 'Literal["a", 1, True] | None'),
        ({"enum": [1, True]}, "Literal[1, True]"),
        ({"const": "x"}, 'Literal["x"]'),
        ({"type": "number", "enum": [0.5, 1]}, "float"),
        ({"type": ["string", "null"]}, "str | None"),
        ({"type": "string", "nullable": True}, "str | None"),
        ({"anyOf": [{"type": "string"}, {"type": "null"}]}, "str | None"),
        ({"oneOf": [{"type": "string"}, {"type": "integer"}]}, "str | int"),
        ({"anyOf": [{"type": "string"}, {}]}, "JsonValue"),
        ({"type": "string", "anyOf": [{"format": "email"}, {"format": "uri"}]}, "str"),
        ({"$ref": "https://example.com/schema.json"}, "JsonValue"),
        ({"$ref": "#/$defs/missing"}, "JsonValue"),
        ({"prefixItems": [{"type": "string"}, {"type": "integer"}]}, "list[str | int]"),
        ({"allOf": [{"type": "integer"}]}, "int"),
        ({"allOf": [{"type": "integer"}, {"type": "string"}]}, "JsonValue"),
    ],
)
def test_simple_types(schema: Any, expected: str) -> None:
    assert param(schema) == expected


def test_optional_parameters_default_to_none_once() -> None:
    assert param({"type": "string"}, required=False) == "str | None = None"
    assert param({"type": ["string", "null"]}, required=False) == "str | None = None"
    assert param({}, required=False) == "JsonValue = None"


def test_required_parameters_come_first_then_sorted() -> None:
    props = {k: {"type": "string"} for k in ("z", "b", "a", "y")}
    text = sdk({"type": "object", "properties": props, "required": ["z", "y"]})
    assert "(*, y: str, z: str, a: str | None = None, b: str | None = None)" in text


def test_object_shapes_are_typeddicts_named_by_path() -> None:
    options = {
        "type": "object",
        "description": "Options.",
        "properties": {"deep": {"type": "boolean", "description": "Go deep."}},
    }
    text = sdk({"type": "object", "properties": {"options": options}})
    assert 'class TOptions(TypedDict):\n    """Options."""\n' in text
    assert "    deep: NotRequired[bool]  # Go deep.\n" in text
    assert "options: TOptions | None = None" in text


def test_defs_become_named_types_and_may_recurse() -> None:
    defs = {
        "Tree": {
            "type": "object",
            "properties": {"kids": {"type": "array", "items": {"$ref": "#/$defs/Tree"}}},
        },
        "Kind": {"enum": ["a", "b"], "description": "The kind."},
        "Unused": {"type": "string"},
    }
    props = {"tree": {"$ref": "#/$defs/Tree"}, "kind": {"$ref": "#/$defs/Kind"}}
    text = sdk({"type": "object", "$defs": defs, "properties": props, "required": ["tree"]})
    assert "class Tree(TypedDict):\n    kids: NotRequired[list[Tree]]\n" in text
    assert 'Kind: TypeAlias = Literal["a", "b"]\n"""The kind."""\n' in text
    assert "Unused" not in text


def test_same_def_name_different_content_gets_tool_prefixes() -> None:
    def tool(name: str, kind: str) -> dict[str, Any]:
        defs = {"Item": {"type": "object", "properties": {"v": {"type": kind}}}}
        schema = {"$defs": defs, "type": "object", "properties": {"i": {"$ref": "#/$defs/Item"}}}
        return {"name": name, "inputSchema": schema}

    text = sdkgen.python_sdk([tool("b", "string"), tool("a", "integer")])
    assert "class AItem(TypedDict):\n    v: NotRequired[int]" in text
    assert "class BItem(TypedDict):\n    v: NotRequired[str]" in text
    shared = sdkgen.python_sdk([tool("b", "string"), tool("a", "string")])
    assert "class Item(TypedDict):" in shared
    assert "AItem" not in shared


def test_repeated_inline_shapes_are_shared() -> None:
    shape = {"type": "object", "title": "Page", "properties": {"n": {"type": "integer"}}}
    tools = [
        {"name": n, "inputSchema": {"type": "object", "properties": {"page": shape}}}
        for n in ("a", "b")
    ]
    text = sdkgen.python_sdk(tools)
    assert text.count("(TypedDict)") == 1
    assert "class Page(TypedDict):" in text
    assert text.count("page: Page | None = None") == 2


def test_all_of_objects_merge() -> None:
    schema = {
        "allOf": [
            {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]},
            {"$ref": "#/$defs/B"},
        ],
    }
    defs = {"B": {"type": "object", "properties": {"b": {"type": "integer"}}}}
    text = sdk({"type": "object", "$defs": defs, "properties": {"x": schema}})
    assert "class TX(TypedDict):\n    a: str\n    b: NotRequired[int]\n" in text


def test_keys_that_are_not_python_names_use_unpack() -> None:
    params = {"type": "object", "properties": {"from": {"type": "string"}}, "required": ["from"]}
    text = sdk(params)
    assert 'TArgs = TypedDict("TArgs", {\n    "from": str,\n})' in text
    assert "async def t(**args: Unpack[TArgs]) -> JsonValue:" in text


def test_root_recursion_names_the_arguments() -> None:
    params = {"type": "object", "properties": {"sub": {"$ref": "#"}, "v": {"type": "integer"}}}
    text = sdk(params)
    assert "class TArgs(TypedDict):\n    sub: NotRequired[TArgs]\n" in text
    assert "async def t(*, sub: TArgs | None = None, v: int | None = None)" in text


@pytest.mark.parametrize(
    ("params", "signature"),
    [
        ({"type": "object"}, "()"),
        ({"type": "object", "properties": {}}, "()"),
        ({}, "(**args: JsonValue)"),
        ({"type": "object", "additionalProperties": True}, "(**args: JsonValue)"),
        ({"type": "object", "additionalProperties": {"type": "integer"}}, "(**args: int)"),
        (
            {"type": "object", "properties": {"args": {}}, "additionalProperties": True},
            "(*, args: JsonValue = None, **args_: JsonValue)",
        ),
    ],
)
def test_signatures(params: Any, signature: str) -> None:
    assert f"async def t{signature} -> JsonValue:" in sdk(params)


def test_output_schemas_type_the_result() -> None:
    assert "-> JsonValue:" in sdk()
    assert "-> list[int]:" in sdk(output={"type": "array", "items": {"type": "integer"}})
    text = sdk(output={"type": "string", "description": "The id."})
    assert "async def t() -> str:\n" in text
    assert "Returns: The id." in text
    out = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
    assert "class TResult(TypedDict):\n    n: int\n" in sdk(output=out)


def test_facts_document_constraints() -> None:
    schema = {
        "type": "integer",
        "description": "Page size.",
        "minimum": 1,
        "maximum": 100,
        "default": 30,
    }
    params = {"type": "object", "properties": {"size": schema}}
    assert "size: Page size. (>= 1; <= 100; default 30)" in sdk(params)


def test_type_names_never_shadow_tool_methods_or_builtins() -> None:
    page = {"type": "object", "properties": {"list": {"type": "integer"}, "b": {"type": "array"}}}
    tools = [
        {"name": "ListPage", "inputSchema": {}},
        {"name": "list", "inputSchema": {"type": "object", "properties": {"page": page}}},
    ]
    text = sdkgen.python_sdk(tools)
    assert "async def ListPage(**args: JsonValue)" in text
    assert "async def list_(*, page: ListPage_2 | None = None)" in text
    assert 'ListPage_2 = TypedDict("ListPage_2", {\n    "b": NotRequired[list[JsonValue]],' in text


def test_parameters_root_may_be_a_ref() -> None:
    args = {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}
    params = {"$defs": {"A": args}, "$ref": "#/$defs/A"}
    assert "async def t(*, q: str) -> JsonValue:" in sdk(params)
