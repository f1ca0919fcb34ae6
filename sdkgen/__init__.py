"""sdkgen: tool manifest -> typed Python and TypeScript SDK text (stdlib only).

Python: the stub (`.pyi`) text of a module `tools`: one `async def` per tool, sorted by
original name, with keyword-only parameters (required first, then optional with their
default or `= ...`), or `**args: Unpack[XArgs]` when a key is not a Python name; TypedDicts
for object shapes (one name per shape), aliases for `$defs`, `JsonValue` for untyped JSON,
`ToolCallError`, and parameter docs several tools share said once. TypeScript: `declare
const tools: {...}` keeping the original tool names, tuples for `prefixItems`.
Importing sdkgen loads nothing else: each name is imported on first use (PEP 562).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from sdkgen._check import Diagnostic, check_program, render_diagnostics
    from sdkgen._check_ts import check_typescript
    from sdkgen._exceptions import CheckerFailed, CheckerNotFound, ManifestError, SdkgenError
    from sdkgen._sdk import python_names, python_sdk, sdk_hash, typescript_sdk

__all__ = (
    "CheckerFailed",
    "CheckerNotFound",
    "Diagnostic",
    "ManifestError",
    "SdkgenError",
    "check_program",
    "check_typescript",
    "python_names",
    "python_sdk",
    "render_diagnostics",
    "sdk_hash",
    "typescript_sdk",
)

_HOMES = {
    "CheckerFailed": "_exceptions",
    "CheckerNotFound": "_exceptions",
    "Diagnostic": "_check",
    "ManifestError": "_exceptions",
    "SdkgenError": "_exceptions",
    "check_program": "_check",
    "check_typescript": "_check_ts",
    "python_names": "_sdk",
    "python_sdk": "_sdk",
    "render_diagnostics": "_check",
    "sdk_hash": "_sdk",
    "typescript_sdk": "_sdk",
}


def __getattr__(name: str) -> object:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'sdkgen' has no attribute {name!r}")
    value: object = getattr(importlib.import_module(f"sdkgen.{home}"), name)
    if getattr(value, "__module__", None) != __name__:
        value.__module__ = __name__
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
