"""Bare JSON Schema in: a node that validates as given, with a typed view of the schema."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

from ._jsonschema import SchemaLimits, compile_schema
from ._schema import (
    MISSING,
    Array,
    Boolean,
    Integer,
    Json,
    Node,
    Null,
    Number,
    Object,
    OneOf,
    String,
    _is_int,
    _is_number,
)

__all__ = ("from_json_schema",)


def from_json_schema(
    source: Mapping[str, Any] | bool,
    *,
    required: bool = False,
    loose: bool = False,
    limits: SchemaLimits | None = None,
) -> Node:
    """A bare JSON Schema (any draft 4 to 2020-12) as a node that validates as given.

    Raises ``SchemaError`` naming the JSON pointer and the problem when the schema is
    invalid; with ``loose`` the invalid parts are cut instead (the check gets looser, never
    stricter). The node's fields are a typed view of the schema; objects stay open.
    """
    bare = compile_schema(source, loose=loose, limits=limits)
    view = _view(bare.source, required)
    return dataclasses.replace(view, bare=bare)


def _view(source: Any, required: bool = False) -> Node:
    """A best-effort typed view of a JSON Schema (never raises; what it cannot say is Json)."""
    if not isinstance(source, Mapping):
        return Json(required=required)
    common: dict[str, Any] = {"required": required}
    for key in ("description", "title"):
        if isinstance(source.get(key), str):
            common[key] = source[key]
    if "default" in source:
        common["default"] = source["default"]
    for key in ("oneOf", "anyOf"):
        options = source.get(key)
        if isinstance(options, list | tuple) and options and "type" not in source:
            return OneOf(options=tuple(_view(option) for option in options), **common)
    kind = source.get("type")
    if isinstance(kind, list | tuple):
        kinds = [k for k in kind if isinstance(k, str)]
        views = tuple(_view({**source, "type": k}) for k in kinds)
        return OneOf(options=views, **common) if len(views) != 1 else views[0]
    if kind is None:
        kind = _infer_kind(source)
    enum = source.get("enum")
    const = source.get("const", MISSING)
    checks: dict[str, Callable[[object], bool]] = {
        "string": _is_str,
        "number": _is_number,
        "integer": _is_int,
    }
    check = checks.get(str(kind), _is_bool)
    scalar: dict[str, Any] = {}
    if isinstance(enum, list | tuple) and all(check(item) for item in enum):
        scalar["enum"] = tuple(enum)
    if const is not MISSING and check(const):
        scalar["const"] = const
    if kind == "string":
        texts = {"pattern": "pattern", "format": "format"}
        texts_found = {k: source[v] for k, v in texts.items() if isinstance(source.get(v), str)}
        counts = {"min_length": "minLength", "max_length": "maxLength"}
        return String(**common, **scalar, **_counts(source, counts), **texts_found)
    if kind in ("number", "integer"):
        bounds = {
            "minimum": "minimum",
            "maximum": "maximum",
            "exclusive_minimum": "exclusiveMinimum",
            "exclusive_maximum": "exclusiveMaximum",
            "multiple_of": "multipleOf",
        }
        found = {k: source[v] for k, v in bounds.items() if _is_number(source.get(v))}
        node_type = Number if kind == "number" else Integer
        return node_type(**common, **scalar, **found)
    if kind == "boolean":
        return Boolean(**common, **scalar)
    if kind == "null":
        return Null(**common)
    if kind == "array":
        items = source.get("items")
        counts = {"min_items": "minItems", "max_items": "maxItems"}
        item_view = _view(items) if isinstance(items, Mapping) else None
        return Array(items=item_view, **common, **_counts(source, counts))
    if kind == "object" or "properties" in source:
        needed = source.get("required")
        needed = set(needed) if isinstance(needed, list | tuple) else set()
        raw = source.get("properties")
        props = {
            str(key): _view(child, key in needed)
            for key, child in (raw.items() if isinstance(raw, Mapping) else ())
        }
        for key in sorted(str(k) for k in needed - set(props)):
            props[key] = Json(required=True)
        extra = source.get("additionalProperties", True)
        extra_node: bool | Node = extra if isinstance(extra, bool) else _view(extra)
        return Object(
            properties=tuple(props.items()),
            required_names=frozenset(k for k, n in props.items() if n.required),
            additional_properties=extra_node,
            **common,
        )
    return Json(**common)


def _is_bool(value: object) -> bool:
    return isinstance(value, bool)


def _counts(source: Mapping[str, Any], names: Mapping[str, str]) -> dict[str, Any]:
    return {k: source[v] for k, v in names.items() if _is_int(source.get(v)) and source[v] >= 0}


def _is_str(value: object) -> bool:
    return isinstance(value, str)


def _infer_kind(source: Mapping[str, Any]) -> str:
    values = list(source.get("enum", ())) if isinstance(source.get("enum"), list) else []
    if "const" in source:
        values.append(source["const"])
    kinds = {
        "boolean" if isinstance(v, bool) else "integer" if _is_int(v) else
        "number" if _is_number(v) else "string" if _is_str(v) else "?"
        for v in values
    }  # fmt: skip
    if kinds == {"integer", "number"}:
        return "number"
    return kinds.pop() if len(kinds) == 1 and "?" not in kinds else "any"
