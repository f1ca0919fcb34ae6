"""Measure per-call argument validation: the DSL walk (the validator before bare JSON Schema
support), today's ``host.tools.validate`` on DSL nodes and on bare JSON Schema (jsonschema-rs
behind an explicit-stack scan), and the pure-Python ``jsonschema`` library, on three shapes:
a flat 2-int tool, a pydantic-style nested schema (``$defs``, ``anyOf`` with null) and a large
github-style schema. Prints microseconds per call (best of 7 repeats). Run from the repository
root: ``python benchmarks/validation.py``.
"""

from __future__ import annotations

import dataclasses
import json
import sys
import timeit
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import jsonschema

from host.tools import Node, Object, from_json_schema, schema, validate
from host.tools._validate import _flat_object_valid, _walk
from tests.host.tools import corpus


def _before(node: Node, value: Any) -> str | None:
    """What ``validate`` did before: the flat-object shortcut, else the explicit-stack walk."""
    if isinstance(node, Object) and _flat_object_valid(node, value):
        return None
    return _walk(node, value)


def _per_call(fn: Callable[[], object], number: int) -> float:
    return min(timeit.repeat(fn, number=number, repeat=7)) / number * 1e6


def _cases() -> list[tuple[str, Any, Any]]:
    flat = {
        "type": "object",
        "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
        "required": ["a", "b"],
        "additionalProperties": False,
    }
    order = corpus.cases("pydantic_models")["Order"]
    tools = {tool["name"]: tool for tool in corpus.mcp_tools(("github",))}
    big = max(tools.values(), key=lambda tool: len(json.dumps(tool["inputSchema"])))
    big_value = corpus.example(big["inputSchema"], big["inputSchema"])
    return [
        ("flat 2-int tool", flat, {"a": 1, "b": 2}),
        ("pydantic-style nested (Order)", order["schema"], order["valid"][0]),
        (f"github-style ({big['name']})", big["inputSchema"], big_value),
    ]


def _rows(label: str, source: Any, value: Any) -> list[tuple[str, Callable[[], object]]]:
    bare = from_json_schema(source)
    view = dataclasses.replace(bare, bare=None)  # the typed view, as DSL nodes
    reference = jsonschema.Draft202012Validator(source)
    assert validate(bare, value) is None and reference.is_valid(value)
    rows: list[tuple[str, Callable[[], object]]] = [
        ("before: DSL walk (typed view)", lambda: _before(view, value)),
        ("now: validate, DSL nodes", lambda: validate(view, value)),
        ("now: validate, bare JSON Schema", lambda: validate(bare, value)),
        ("jsonschema (pure Python)", lambda: reference.is_valid(value)),
    ]
    if label.startswith("flat"):
        dsl = schema.object(
            {"a": schema.integer(required=True), "b": schema.integer(required=True)},
            additional_properties=False,
        )
        rows.insert(1, ("before: DSL walk (schema.object)", lambda: _before(dsl, value)))
        rows.insert(3, ("now: validate, schema.object", lambda: validate(dsl, value)))
    return rows


def main() -> None:
    """Print the table."""
    print(f"{'schema':52} {'validator':34} {'us/call':>8}")
    for label, source, value in _cases():
        for name, fn in _rows(label, source, value):
            print(f"{label:52} {name:34} {_per_call(fn, 20_000):8.2f}")


if __name__ == "__main__":
    main()
