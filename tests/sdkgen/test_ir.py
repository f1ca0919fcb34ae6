"""Tests for schema -> type mapping, seen through the Python and TypeScript SDK text."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

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


def test_optional_parameters_show_their_default_or_an_ellipsis() -> None:
    assert param({"type": "string"}, required=False) == "str = ..."
    assert param({"type": ["string", "null"]}, required=False) == "str | None = ..."
    assert param({}, required=False) == "JsonValue = ..."
    assert param({"type": "string", "default": "x"}, required=False) == 'str = "x"'
    assert param({"enum": ["a", "b"], "default": "b"}, required=False) == 'Literal["a", "b"] = "b"'
    # A default the type does not admit, or one that is not a scalar, stays in the doc.
    text = sdk({"type": "object", "properties": {"p": {"type": "integer", "default": "x"}}})
    assert 'async def t(*, p: int = ...) -> JsonValue:\n """p: (default "x")"""' in text
    text = sdk({"type": "object", "properties": {"p": {"type": "array", "default": []}}})
    assert '"""p: (default [])"""' in text


def test_parameters_and_fields_keep_their_declared_order() -> None:
    props = {k: {"type": "string"} for k in ("z", "b", "a", "y")}
    text = sdk({"type": "object", "properties": props, "required": ["z", "y"]})
    assert "(*, z: str, b: str = ..., a: str = ..., y: str)" in text
    shape = {"type": "object", "properties": props, "required": ["y"]}
    text = sdk({"type": "object", "properties": {"options": shape}})
    assert (
        "class Options(TypedDict):\n z: NotRequired[str]\n b: NotRequired[str]\n"
        " a: NotRequired[str]\n y: str\n"
    ) in text


@given(
    st.lists(st.sampled_from("abcdefgh"), min_size=1, max_size=8, unique=True),
    st.sets(st.sampled_from("abcdefgh")),
)
def test_any_order_of_properties_is_the_order_shown(keys: list[str], needed: set[str]) -> None:
    props = {k: {"type": "integer"} for k in keys}
    required = [k for k in keys if k in needed]
    text = sdk({"type": "object", "properties": {"o": {"type": "object", "properties": props}}})
    fields = text.split("class O(TypedDict):\n", 1)[1].split("async def", 1)[0]
    assert [line.split(":")[0].strip() for line in fields.splitlines()] == keys
    line = next(
        x
        for x in sdk({"type": "object", "properties": props, "required": required}).splitlines()
        if x.startswith("async def t(")
    )
    assert [p.split(":")[0] for p in line[len("async def t(*, ") :].split(", ")] == keys


def test_shapes_with_the_same_fields_in_another_order_are_two_types() -> None:
    one = {"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "string"}}}
    two = {"type": "object", "properties": {"b": {"type": "string"}, "a": {"type": "string"}}}
    text = sdk({"type": "object", "properties": {"x": one, "y": one, "z": two, "w": two}})
    assert "class X(TypedDict):\n a: NotRequired[str]\n b: NotRequired[str]\n" in text
    assert "class W(TypedDict):\n b: NotRequired[str]\n a: NotRequired[str]\n" in text


def test_object_shapes_are_typeddicts_named_by_property() -> None:
    options = {
        "type": "object",
        "description": "Options.",
        "properties": {"deep": {"type": "boolean", "description": "Go deep."}},
    }
    text = sdk({"type": "object", "properties": {"options": options}})
    assert 'class Options(TypedDict):\n """Options."""\n' in text
    assert " deep: NotRequired[bool] # Go deep.\n" in text
    assert "options: Options = ..." in text


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
    assert "class Tree(TypedDict):\n kids: NotRequired[list[Tree]]\n" in text
    assert 'Kind: TypeAlias = Literal["a", "b"]\n"""The kind."""\n' in text
    assert "Unused" not in text


def test_same_def_name_different_content_gets_tool_prefixes() -> None:
    def tool(name: str, kind: str) -> dict[str, Any]:
        defs = {"Item": {"type": "object", "properties": {"v": {"type": kind}}}}
        schema = {"$defs": defs, "type": "object", "properties": {"i": {"$ref": "#/$defs/Item"}}}
        return {"name": name, "inputSchema": schema}

    text = sdkgen.python_sdk([tool("b", "string"), tool("a", "integer")])
    assert "class AItem(TypedDict):\n v: NotRequired[int]" in text
    assert "class BItem(TypedDict):\n v: NotRequired[str]" in text
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
    assert text.count("page: Page = ...") == 2


def test_all_of_objects_merge() -> None:
    schema = {
        "allOf": [
            {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]},
            {"$ref": "#/$defs/B"},
        ],
    }
    defs = {"B": {"type": "object", "properties": {"b": {"type": "integer"}}}}
    text = sdk({"type": "object", "$defs": defs, "properties": {"x": schema}})
    assert "class X(TypedDict):\n a: str\n b: NotRequired[int]\n" in text


def test_keys_that_are_not_python_names_use_unpack() -> None:
    params = {"type": "object", "properties": {"from": {"type": "string"}}, "required": ["from"]}
    text = sdk(params)
    assert 'TArgs = TypedDict("TArgs", {\n "from": str,\n})' in text
    assert "async def t(**args: Unpack[TArgs]) -> JsonValue:" in text


def test_root_recursion_names_the_arguments() -> None:
    params = {"type": "object", "properties": {"sub": {"$ref": "#"}, "v": {"type": "integer"}}}
    text = sdk(params)
    assert "class TArgs(TypedDict):\n sub: NotRequired[TArgs]\n" in text
    assert "async def t(*, sub: TArgs = ..., v: int = ...)" in text


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
            "(*, args: JsonValue = ..., **args_: JsonValue)",
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
    assert "class TResult(TypedDict):\n n: int\n" in sdk(output=out)


def test_facts_document_constraints() -> None:
    schema = {
        "type": "integer",
        "description": "Page size.",
        "minimum": 1,
        "maximum": 100,
        "default": 30,
    }
    params = {"type": "object", "properties": {"size": schema}}
    text = sdk(params)
    assert (
        'async def t(*, size: int = 30) -> JsonValue:\n """size: Page size. (>= 1; <= 100)"""'
        in text
    )
    kept = {"type": "string", "format": "uri", "not": {"const": ""}, "multipleOf": 2}
    assert '"""p: (format uri; multiple of 2; not {"const": ""})"""' in sdk(
        {"type": "object", "properties": {"p": kept}}
    )


def test_type_names_never_shadow_tool_functions_or_builtins() -> None:
    page = {"type": "object", "properties": {"list": {"type": "integer"}, "b": {"type": "array"}}}
    tools = [
        {"name": "Page", "inputSchema": {}},
        {"name": "ListPage", "inputSchema": {}},
        {"name": "list", "inputSchema": {"type": "object", "properties": {"page": page}}},
    ]
    text = sdkgen.python_sdk(tools)
    assert "async def ListPage(**args: JsonValue)" in text
    assert "async def list_(*, page: ListPage_2 = ...)" in text
    assert (
        'ListPage_2 = TypedDict("ListPage_2", {\n "list": NotRequired[int],\n'
        ' "b": NotRequired[list[JsonValue]],\n})'
    ) in text


def test_parameters_root_may_be_a_ref() -> None:
    args = {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}
    params = {"$defs": {"A": args}, "$ref": "#/$defs/A"}
    assert "async def t(*, q: str) -> JsonValue:" in sdk(params)


def test_list_items_are_named_in_the_singular() -> None:
    entity = {"type": "object", "properties": {"name": {"type": "string"}}}
    params = {"type": "object", "properties": {"entities": {"type": "array", "items": entity}}}
    assert "class Entity(TypedDict):\n name: NotRequired[str]\n" in sdk(params)


def test_shapes_with_the_same_content_share_one_name() -> None:
    text_result = {"type": "object", "properties": {"content": {"type": "string"}}}
    tools = [{"name": n, "inputSchema": {}, "outputSchema": text_result} for n in ("b", "a", "c")]
    text = sdkgen.python_sdk(tools)
    assert text.count("(TypedDict)") == 1
    assert "class ContentResult(TypedDict):" in text
    assert text.count("-> ContentResult:") == 3


def test_parameter_docs_several_tools_share_are_said_once() -> None:
    owner = {"type": "string", "description": "Repository owner"}
    other = {"type": "string", "description": "Another owner"}
    tools = [
        {"name": n, "inputSchema": {"type": "object", "properties": {"owner": o}}}
        for n, o in (("a", owner), ("b", owner), ("c", other))
    ]
    text = sdkgen.python_sdk(tools)
    assert "# owner: Repository owner\n" in text
    assert text.count("Repository owner") == 1
    assert '"""owner: Another owner"""' in text
    ts = sdkgen.typescript_sdk(tools)
    assert " * owner: Repository owner\n" in ts
    assert "/** owner: Another owner */" in ts


def test_prefix_items_are_tuples_in_typescript() -> None:
    pair = {"prefixItems": [{"type": "string"}, {"type": "integer"}]}
    closed = {**pair, "items": False}
    more = {**pair, "items": {"type": "boolean"}}
    props = {"pair": pair, "closed": closed, "more": more}
    tools = [{"name": "t", "inputSchema": {"type": "object", "properties": props}}]
    ts = sdkgen.typescript_sdk(tools)
    assert "pair?: [string, number]" in ts
    assert "closed?: [string, number]" in ts
    assert "more?: [string, number, ...boolean[]]" in ts
    assert "more: list[str | int | bool] = ..." in sdkgen.python_sdk(tools)
