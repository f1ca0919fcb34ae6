"""define_tool: parameters in its three forms, the output contract, and checks on definitions."""

from __future__ import annotations

from typing import Any

import pytest

from host.tools import (
    Object,
    Output,
    ToolDefinitionError,
    ToolRunContext,
    define_tool,
    schema,
    to_json_schema,
)


def _noop(args: Any, ctx: ToolRunContext) -> Any:
    return None


def test_mapping_parameters_make_a_root_of_just_those_properties() -> None:
    definition = define_tool(
        name="read_file",
        description="Read a file.",
        parameters={"path": schema.string(required=True), "offset": schema.number()},
        output={"schema": schema.string(), "render": lambda _a, v: [{"type": "text", "text": v}]},
        execute=_noop,
    )
    assert to_json_schema(definition.parameters) == {
        "type": "object",
        "properties": {"path": {"type": "string"}, "offset": {"type": "number"}},
        "required": ["path"],
        "additionalProperties": False,
    }
    assert isinstance(definition.output, Output)
    assert not definition.is_async


def test_explicit_object_and_bare_json_schema_parameters() -> None:
    closed = define_tool(
        name="a",
        description="",
        parameters=schema.object({"x": schema.integer()}, additional_properties=False),
        execute=_noop,
    )
    assert closed.parameters.additional_properties is False
    bare = define_tool(
        name="b",
        description="",
        parameters={"type": "object", "properties": {"x": {"type": "integer"}}},
        output={"schema": {"type": "integer"}},
        execute=_noop,
    )
    assert isinstance(bare.parameters, Object)
    assert bare.parameters.additional_properties is True
    assert bare.output is not None
    assert to_json_schema(bare.output.schema) == {"type": "integer"}


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"name": ""}, r"tool name '' must be 1-64 letters, digits, '_' or '-'"),
        ({"name": "has space"}, r"tool name 'has space' must be 1-64 letters"),
        ({"name": "x" * 65}, r"tool name 'x{65}' must be 1-64 letters"),
        ({"timeout_ms": 0}, r"^ok: timeout_ms must be a positive int$"),
        ({"timeout_ms": True}, r"^ok: timeout_ms must be a positive int$"),
        ({"parameters": schema.string()}, r"^ok: parameters must be an object schema$"),
        ({"parameters": {"type": "string"}}, r"^ok: parameters must be an object schema$"),
        (
            {"parameters": {"type": "object", "anyOf": []}},
            r"^ok: parameters: invalid JSON Schema at #/anyOf: \[\] has less than 1 item$",
        ),
        ({"parameters": 3}, r"^ok: parameters must be a mapping of nodes or a schema$"),
        ({"output": 3}, r"^ok: output must be an Output or \{schema, render\?, \.\.\.\}$"),
        (
            {"output": {"schema": {"type": "frob"}}},
            r"^ok: output schema: invalid JSON Schema at #/type: \"frob\" is not valid",
        ),
        ({"execute": 3}, r"^ok: execute must be callable$"),
    ],
)
def test_malformed_definitions_are_rejected(changes: dict[str, Any], message: str) -> None:
    options: dict[str, Any] = {
        "name": "ok",
        "description": "",
        "parameters": {},
        "execute": _noop,
        **changes,
    }
    with pytest.raises(ToolDefinitionError, match=message):
        define_tool(**options)


def test_async_execute_is_detected() -> None:
    async def run(args: Any, ctx: ToolRunContext) -> Any:
        return None

    assert define_tool(name="x", description="", parameters={}, execute=run).is_async


def test_find_tools_in_a_bindings_module() -> None:
    import types

    from host.tools import find_tools, tool

    module = types.ModuleType("bindings")

    @tool
    def beta(x: int) -> int:
        return x

    alpha = define_tool(name="alpha", description="", parameters={}, execute=_noop)
    module.beta = beta  # type: ignore[attr-defined]
    module.alpha = alpha  # type: ignore[attr-defined]
    module.alias = alpha  # type: ignore[attr-defined]
    module.helper = _noop  # type: ignore[attr-defined]
    assert find_tools(module) == [alpha, beta]
    assert find_tools({"b": beta}) == [beta]
