"""MCP JSON Schemas -> the registry's schema subset: ``$ref`` inlined, the rest loosened."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from host.tools import SchemaError, from_json_schema

__all__ = ("loosen_schema",)

_KEEP: Final = frozenset(
    {
        "type", "description", "default", "enum", "const", "minLength", "maxLength", "pattern",
        "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "items", "minItems",
        "maxItems", "properties", "required", "additionalProperties", "oneOf",
    }
)  # fmt: skip
_MAX_DEPTH: Final = 32


def _type_names(schema: Any) -> set[str] | None:
    if not isinstance(schema, Mapping):
        return None
    kind = schema.get("type")
    if isinstance(kind, str):
        return {"number"} if kind == "integer" else {kind}
    if isinstance(kind, list) and all(isinstance(k, str) for k in kind):
        return {"number" if k == "integer" else k for k in kind}
    return None


def _disjoint(options: list[Any]) -> bool:
    """True when no value can match two options (each has distinct JSON types)."""
    seen: set[str] = set()
    for option in options:
        names = _type_names(option)
        if names is None or names & seen:
            return False
        seen |= names
    return True


class _Loosener:
    """One pass over a schema document, resolving ``#/$defs/...`` against its root."""

    def __init__(self, root: Mapping[str, Any]) -> None:
        self.root = root

    def resolve(self, ref: str) -> Any:
        if not ref.startswith("#/"):
            return None
        target: Any = self.root
        for raw in ref[2:].split("/"):
            part = raw.replace("~1", "/").replace("~0", "~")
            if not isinstance(target, Mapping) or part not in target:
                return None
            target = target[part]
        return target

    def loosen(self, schema: Any, depth: int, refs: tuple[str, ...]) -> Any:
        if isinstance(schema, bool):
            return {}  # true: any JSON; false: looser than the server, never stricter
        if not isinstance(schema, Mapping) or depth > _MAX_DEPTH:
            return {}
        merged: dict[str, Any] = dict(schema)
        ref = merged.pop("$ref", None)
        if isinstance(ref, str):
            target = None if ref in refs else self.resolve(ref)
            if not isinstance(target, Mapping):
                return _only_description(merged)  # recursive or unknown: any JSON
            refs = (*refs, ref)
            merged = {**target, **merged}
        all_of = merged.pop("allOf", None)
        if isinstance(all_of, list) and len(all_of) == 1 and isinstance(all_of[0], Mapping):
            merged = {**all_of[0], **merged}
            return self.loosen(merged, depth + 1, refs)
        if all_of is not None:
            return _only_description(merged)
        any_of = merged.pop("anyOf", None)
        if isinstance(any_of, list) and "oneOf" not in merged:
            options = [self.loosen(option, depth + 1, refs) for option in any_of]
            if not _disjoint(options) or any(option == {} for option in options):
                return _only_description(merged)
            merged["oneOf"] = options
        out: dict[str, Any] = {}
        for key, value in merged.items():
            if key not in _KEEP:
                continue
            if key == "properties" and isinstance(value, Mapping):
                out[key] = {
                    str(name): self.loosen(child, depth + 1, refs) for name, child in value.items()
                }
            elif key in ("items", "additionalProperties") and isinstance(value, Mapping):
                out[key] = self.loosen(value, depth + 1, refs)
            elif key == "items" and not isinstance(value, Mapping):
                continue  # tuple validation: any items
            elif key == "oneOf" and isinstance(value, list):
                out[key] = [self.loosen(option, depth + 1, refs) for option in value]
            else:
                out[key] = value
        return out if _readable(out) else _only_description(out)


def _only_description(schema: Mapping[str, Any]) -> dict[str, Any]:
    description = schema.get("description")
    return {"description": description} if isinstance(description, str) else {}


def _readable(schema: Mapping[str, Any]) -> bool:
    try:
        from_json_schema(schema)
    except (SchemaError, TypeError, ValueError):
        return False
    return True


def loosen_schema(schema: Any, *, top_object: bool = False) -> dict[str, Any]:
    """A schema ``host.tools.from_json_schema`` accepts that admits every value ``schema`` does.

    ``$ref`` into the same document is inlined (a recursive one becomes any JSON), a
    one-item ``allOf`` is merged, ``anyOf`` over distinct types becomes ``oneOf``, and what
    the registry's subset cannot say (``format``, ``uniqueItems``, ``patternProperties``,
    overlapping unions, ...) is dropped, so the check is looser, never stricter, than the
    server's own. ``top_object`` forces an object at the root (a tool's parameters).
    """
    root = schema if isinstance(schema, Mapping) else {}
    out = _Loosener(root).loosen(schema, 0, ())
    assert isinstance(out, dict)
    if top_object:
        if out.get("type") != "object":
            out = {**_only_description(out), "type": "object", "properties": {}}
        if not _readable(out):
            out = {"type": "object", "properties": {}}
    return out
