"""The public generators: manifest -> Python SDK, TypeScript SDK, name map, content hash."""

from __future__ import annotations

import hashlib
from typing import Literal

from sdkgen._ir import build_sdk
from sdkgen._manifest import Manifest, read_manifest
from sdkgen._names import python_tool_names
from sdkgen._python import emit_python
from sdkgen._typescript import emit_typescript

CallStyle = Literal["async", "sync"]


def _style(call_style: str) -> CallStyle:
    if call_style not in ("async", "sync"):
        raise ValueError(f"call_style must be 'async' or 'sync', not {call_style!r}")
    return call_style  # type: ignore[return-value]


def python_sdk(manifest: Manifest, *, call_style: CallStyle = "async") -> str:
    """Return the Python SDK text (a `.pyi`-style stub) for the tools in manifest.

    manifest is a list of tools, each `{name, description?, parameters, output?}`
    (host.tools) or `{name, description?, inputSchema, outputSchema?}` (MCP), or a
    mapping with such a `tools` list. The text is the stub of a module `tools`: one
    `async def <escaped name>(*, ...)` per tool (`def` with `call_style="sync"`: plain,
    blocking calls), sorted by name, plus TypedDicts, aliases, `JsonValue` and
    `ToolCallError`; the same tools give the same bytes. Raises ManifestError for an
    unreadable manifest, ValueError for an unknown call style.
    """
    return emit_python(build_sdk(manifest), _style(call_style))


def typescript_sdk(manifest: Manifest) -> str:
    """Return the TypeScript SDK text: `declare const tools: {...}` with interfaces and JSDoc.

    Methods keep the original tool names (quoted where needed), each taking one object
    argument and returning a Promise of the output type. Same input rules as python_sdk.
    """
    return emit_typescript(build_sdk(manifest))


def python_names(manifest: Manifest) -> dict[str, str]:
    """Return the reverse map: escaped Python attribute name -> original tool name.

    The host routes a call to `tools.<attribute>` through it. The fixed rules: non-word
    characters become `_`; a leading digit or empty name gets a `_` prefix; keywords and
    names the stub uses (`list`, `str`, ...) a `_` suffix; a leading `__` a `tool` prefix;
    collisions get `_2`, `_3`, ... in the sorted order of the original names, while a
    name that needs no escaping keeps it.
    """
    forward = python_tool_names(tool.name for tool in read_manifest(manifest))
    return {escaped: original for original, escaped in sorted(forward.items())}


def sdk_hash(text: str) -> str:
    """Return the sha256 hex digest of an SDK text's UTF-8 bytes, for prompt-cache keys."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()
