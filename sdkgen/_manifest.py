"""Read a tool manifest (host.tools or MCP shape) into sorted, validated tool records."""

from __future__ import annotations

import unicodedata
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from sdkgen._exceptions import ManifestError

Schema = Mapping[str, Any] | bool
Manifest = Iterable[Mapping[str, Any]] | Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class Tool:
    """One tool: its name, description, parameters schema and optional output schema."""

    name: str
    description: str
    parameters: Schema | None
    output: Schema | None


def read_manifest(manifest: Manifest) -> tuple[Tool, ...]:
    """Return the manifest's tools sorted by name; raise ManifestError on bad input."""
    items: object = manifest
    if isinstance(manifest, Mapping):
        items = manifest.get("tools")
        if not isinstance(items, list | tuple):
            raise ManifestError("a manifest mapping must have a 'tools' list")
    if isinstance(items, str | bytes) or not isinstance(items, Iterable):
        raise ManifestError("a manifest is a list of tools")
    tools: dict[str, Tool] = {}
    for index, item in enumerate(items):
        tool = _read_tool(index, item)
        if tool.name in tools:
            raise ManifestError(f"tool {tool.name!r} appears twice")
        tools[tool.name] = tool
    return tuple(tools[name] for name in sorted(tools))


def _read_tool(index: int, item: object) -> Tool:
    if not isinstance(item, Mapping):
        raise ManifestError(f"tool #{index} is not an object")
    name = item.get("name")
    if not isinstance(name, str) or not name:
        raise ManifestError(f"tool #{index} has no name")
    description = item.get("description")
    if description is not None and not isinstance(description, str):
        raise ManifestError(f"tool {name!r}: description is not a string")
    key = "parameters" if "parameters" in item else "inputSchema"
    parameters = _schema(name, key, item.get(key))
    key = "output" if "output" in item else "outputSchema"
    output = _schema(name, key, item.get(key))
    if isinstance(output, Mapping) and isinstance(output.get("schema"), Mapping | bool):
        output = output["schema"]  # host.tools may wrap it as {schema, render}
    return Tool(name, clean_text(description or ""), parameters, output)


def _schema(tool: str, key: str, value: object) -> Schema | None:
    if value is None or isinstance(value, bool):
        return value
    if not isinstance(value, Mapping):
        raise ManifestError(f"tool {tool!r}: {key} is not a JSON Schema object")
    return value


def clean_text(text: str) -> str:
    """Normalise a description: newlines, control characters, indentation, blank edges."""
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    text = text.replace("\u2028", "\n").replace("\u2029", "\n")
    text = "".join(_clean_char(c) for c in text)
    lines = [line.rstrip() for line in text.split("\n")]
    indents = [len(line) - len(line.lstrip()) for line in lines[1:] if line.strip()]
    margin = min(indents, default=0)
    lines = [lines[0].strip()] + [line[margin:] for line in lines[1:]]
    while lines and not lines[-1]:
        lines.pop()
    while lines and not lines[0]:
        lines.pop(0)
    return "\n".join(lines)


def _clean_char(c: str) -> str:
    if c == "\n":
        return c
    if c == "\t":
        return "    "
    category = unicodedata.category(c)
    if category == "Cc":
        return " "
    if category == "Cs":
        return "\ufffd"
    return c
