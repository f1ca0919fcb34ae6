"""The @tool decorator: schemas from hints and docstrings, the run context, plain calls."""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any, Literal, NotRequired, TypedDict

import msgspec
import pytest

from host.tools import (
    FunctionTool,
    ToolDefinition,
    ToolDefinitionError,
    ToolRunContext,
    hint_to_node,
    to_json_schema,
    tool,
)


class Options(TypedDict):
    """Search options."""

    depth: int
    mode: NotRequired[Literal["fast", "slow"]]


@tool
def grep(
    pattern: str,
    paths: list[str],
    options: Options,
    *,
    limit: Annotated[int, msgspec.Meta(ge=1, le=100, description="Max hits")] = 10,
    scale: int | float | None = None,
    labels: dict[str, bool] | None = None,
) -> list[str]:
    """Search files for a pattern.

    Args:
        pattern: The regular expression
            to look for.
        paths: Where to look.
    """
    return [pattern, *paths][:limit]


@tool(name="slow_add", description="Add two numbers.", timeout_ms=50, concurrency_safe=True)
async def add(a: int, b: int, *, ctx: ToolRunContext | None = None) -> int:
    return a + b


def test_decorated_function_is_a_definition_and_still_callable() -> None:
    assert isinstance(grep, ToolDefinition)
    assert isinstance(grep, FunctionTool)
    assert grep("x", ["a", "b"], {"depth": 1}, limit=2) == ["x", "a"]
    assert grep.__name__ == "grep"
    assert grep.__module__ == __name__


def test_schema_from_signature_docstring_and_hints() -> None:
    assert grep.name == "grep"
    assert grep.description == "Search files for a pattern."
    assert to_json_schema(grep.parameters) == {
        "type": "object",
        "properties": {
            "pattern": {"type": "string", "description": "The regular expression to look for."},
            "paths": {
                "type": "array",
                "description": "Where to look.",
                "items": {"type": "string"},
            },
            "options": {
                "type": "object",
                "title": "Options",
                "description": "Search options.",
                "properties": {
                    "depth": {"type": "integer"},
                    "mode": {"type": "string", "enum": ["fast", "slow"]},
                },
                "required": ["depth"],
                "additionalProperties": False,
            },
            "limit": {
                "type": "integer",
                "description": "Max hits",
                "minimum": 1,
                "maximum": 100,
                "default": 10,
            },
            "scale": {"oneOf": [{"type": "number"}, {"type": "null"}], "default": None},
            "labels": {
                "oneOf": [
                    {
                        "type": "object",
                        "properties": {},
                        "additionalProperties": {"type": "boolean"},
                    },
                    {"type": "null"},
                ],
                "default": None,
            },
        },
        "required": ["pattern", "paths", "options"],
        "additionalProperties": False,
    }
    assert grep.output is not None
    assert to_json_schema(grep.output.schema) == {"type": "array", "items": {"type": "string"}}


def test_options_and_context_parameter() -> None:
    assert add.name == "slow_add"
    assert add.description == "Add two numbers."
    assert add.timeout_ms == 50
    assert add.concurrency_safe is True
    assert add.is_async
    assert "ctx" not in add.parameters.property_map


@pytest.mark.parametrize(
    ("hint", "expected"),
    [
        (Literal["a"], {"type": "string", "const": "a"}),
        (Literal[1, 2], {"type": "integer", "enum": [1, 2]}),
        (
            Literal["a", 1],
            {"oneOf": [{"type": "string", "const": "a"}, {"type": "integer", "const": 1}]},
        ),
        (Literal[None], {"type": "null"}),
        (str | int, {"oneOf": [{"type": "string"}, {"type": "integer"}]}),
        (Any, {}),
        (list, {"type": "array"}),
        (None, {"type": "null"}),
        (Annotated[str, "A doc"], {"type": "string", "description": "A doc"}),
        (
            Annotated[list[int], msgspec.Meta(max_length=2)],
            {"type": "array", "items": {"type": "integer"}, "maxItems": 2},
        ),
        (
            Annotated[str, msgspec.Meta(min_length=1, pattern="^x")],
            {"type": "string", "minLength": 1, "pattern": "^x"},
        ),
    ],
)
def test_hint_translation(hint: Any, expected: dict[str, Any]) -> None:
    assert to_json_schema(hint_to_node(hint)) == expected


def test_unsupported_signatures_are_rejected() -> None:
    def star(*args: int) -> None: ...

    def bad_hint(x: set[int]) -> None: ...

    def bad_key(x: dict[int, str]) -> None: ...

    def bad_return() -> tuple[int, int]:
        raise NotImplementedError

    problems: dict[Callable[..., Any], str] = {
        star: r"star: parameter 'args' cannot be a tool argument",
        bad_hint: r"bad_hint: parameter 'x': unsupported type hint set\[int\]",
        bad_key: r"bad_key: parameter 'x': dict keys must be str, got <class 'int'>",
        bad_return: r"bad_return: return annotation: unsupported type hint tuple\[int, int\]",
    }
    for fn, message in problems.items():
        with pytest.raises(ToolDefinitionError, match=message):
            tool(fn)


def test_no_return_annotation_means_no_output_schema() -> None:
    def f(x: int):  # type: ignore[no-untyped-def]
        return x

    assert tool(f).output is None
