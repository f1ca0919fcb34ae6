"""The schema corpus: real MCP servers' tools, pydantic models, OpenAPI-style schemas."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

DATA = Path(__file__).parent / "data"
SERVERS = ("everything", "filesystem", "github", "memory")


def mcp_tools(servers: tuple[str, ...] = SERVERS) -> list[dict[str, Any]]:
    """Each server's published tools, named ``<server>__<tool>``, schemas verbatim."""
    out = []
    for server in servers:
        listed = json.loads((DATA / f"mcp_{server}.json").read_text(encoding="utf-8"))
        for tool in listed["tools"]:
            out.append({**tool, "name": f"{server}__{tool['name']}"})
    return out


def manifest(servers: tuple[str, ...] = SERVERS) -> list[dict[str, Any]]:
    """The corpus tools as a host.tools manifest (``parameters``, ``output``)."""
    entries = []
    for tool in mcp_tools(servers):
        entry = {
            "name": tool["name"],
            "description": tool.get("description", ""),
            "parameters": tool["inputSchema"],
        }
        if "outputSchema" in tool:
            entry["output"] = tool["outputSchema"]
        entries.append(entry)
    return entries


def cases(name: str) -> dict[str, dict[str, Any]]:
    """``pydantic_models`` or ``openapi``: schema, valid values, (invalid value, path) pairs."""
    found: dict[str, dict[str, Any]] = json.loads((DATA / f"{name}.json").read_text("utf-8"))
    return found


def _resolve(root: Mapping[str, Any], ref: str) -> Any:
    target: Any = root
    for part in ref.lstrip("#/").split("/"):
        target = target[part.replace("~1", "/").replace("~0", "~")]
    return target


def example(schema: Any, root: Mapping[str, Any], depth: int = 0) -> Any:
    """A small value the schema accepts (enough for the corpus: zod and pydantic schemas)."""
    if not isinstance(schema, Mapping) or depth > 20:
        return None
    if "$ref" in schema:
        return example(_resolve(root, schema["$ref"]), root, depth + 1)
    if "default" in schema:
        return schema["default"]
    if "const" in schema:
        return schema["const"]
    if schema.get("enum"):
        return schema["enum"][0]
    for key in ("anyOf", "oneOf"):
        if schema.get(key):
            return example(schema[key][0], root, depth + 1)
    kind = schema.get("type", "object" if "properties" in schema else None)
    if isinstance(kind, list):
        kind = kind[0]
    if kind == "object":
        needed = schema.get("required", [])
        props = schema.get("properties", {})
        return {key: example(props.get(key, {}), root, depth + 1) for key in needed}
    if kind == "array":
        item = example(schema.get("items", {}), root, depth + 1)
        return [item] * max(schema.get("minItems", 0), 1)
    if kind == "string":
        formats = {"uri": "https://example.com", "date-time": "2024-01-01T00:00:00Z"}
        return formats.get(schema.get("format", ""), "x" * max(schema.get("minLength", 1), 1))
    if kind in ("number", "integer"):
        return schema.get("minimum", 1)
    if kind == "boolean":
        return True
    return None


def wrong(schema: Any) -> Any:
    """A value of a JSON type the schema's ``type`` does not allow."""
    kind = schema.get("type") if isinstance(schema, Mapping) else None
    kinds = kind if isinstance(kind, list) else [kind]
    return {"wrong": True} if "object" not in kinds else "wrong"
