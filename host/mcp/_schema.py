"""MCP JSON Schemas as the registry keeps them: as given, with only what is invalid cut."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from host.tools import SchemaLimits, from_json_schema, to_json_schema

__all__ = ("loosen_schema",)


def _is_object(schema: Any) -> bool:
    if not isinstance(schema, Mapping):
        return False
    kind = schema.get("type")
    if kind is None:
        return "properties" in schema or "additionalProperties" in schema
    return bool(kind == "object")


def loosen_schema(
    schema: Any, *, top_object: bool = False, limits: SchemaLimits | None = None
) -> Any:
    """The schema a server published, as ``define_tool`` will check it: the same path.

    A valid schema (draft 4 to 2020-12, ``$ref``, ``anyOf``, ``format``, ... all kept) comes
    back as given. What is invalid (a bad ``pattern``, an unresolvable ``$ref``, a schema
    too deep) is cut to ``{}`` — or the whole schema is, where a cut could reject more — so
    the check is looser, never stricter, than the server's own. ``top_object`` forces an
    object at the root (a tool's parameters).
    """
    out = to_json_schema(from_json_schema(schema, loose=True, limits=limits))
    if top_object and not _is_object(out):
        description = out.get("description") if isinstance(out, Mapping) else None
        out = {"type": "object", "properties": {}}
        if isinstance(description, str):
            out["description"] = description
    return out
