"""What code mode derives from one set of visible tools, kept per scope."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from host.tools import ToolDefinition, from_json_schema, validate

__all__ = ("VIEWS_KEPT", "ToolView", "optional_non_null")


def optional_non_null(manifest: list[dict[str, Any]]) -> dict[str, frozenset[str]]:
    """Per tool, its optional parameters whose schema does not accept null."""
    out: dict[str, frozenset[str]] = {}
    for entry in manifest:
        schema = entry.get("parameters") or {}
        required = set(schema.get("required", ()))
        names = set()
        for name, prop in (schema.get("properties") or {}).items():
            if name in required:
                continue
            try:
                accepts_null = validate(from_json_schema(prop), None) is None
            except Exception:
                accepts_null = True  # a schema we cannot read: pass the argument through
            if not accepts_null:
                names.add(name)
        out[entry["name"]] = frozenset(names)
    return out


@dataclass(frozen=True)
class ToolView:
    """What code mode derives from one set of visible tools (costly: ~1.5 ms for 60 tools)."""

    definitions: tuple[ToolDefinition, ...]  # held, so their ids stay unique while cached
    manifest: list[dict[str, Any]]
    names: dict[str, str]
    optional_non_null: dict[str, frozenset[str]]


#: Tool views kept per CodeMode (agents reuse a few scopes).
VIEWS_KEPT = 16
