"""Loading bindings files: any Python file whose top-level tools are bound under ``tools.``."""

from __future__ import annotations

import importlib.util
import sys
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from host.tools import ToolDefinition, find_tools

__all__ = ("SETUP_HOOK", "Bindings", "BindingsError", "load_bindings")

#: A bindings file may define ``setup_registry(registry)`` to add hooks (pre_execute, guards).
SETUP_HOOK = "setup_registry"


@dataclass
class Bindings:
    """What the bindings files define: their tools (by name) and their registry set-up hooks."""

    tools: list[ToolDefinition] = field(default_factory=list)
    setups: list[Callable[[Any], None]] = field(default_factory=list)


class BindingsError(Exception):
    """A bindings file could not be loaded, or its tools clash (a usage error: exit code 2)."""


def _import_file(path: Path, index: int) -> object:
    if path.is_dir():
        raise BindingsError(f"the bindings file {path} is a directory: give a Python file")
    if not path.is_file():
        raise BindingsError(f"bindings file not found: {path}")
    name = f"dsh_bindings_{index}_{path.stem}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise BindingsError(f"cannot import {path}: not a Python file")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException as exc:  # the file's own error, shown as the user's, not ours
        sys.modules.pop(name, None)
        frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename == str(path)]
        where = f" (line {frames[-1].lineno})" if frames else ""
        raise BindingsError(
            f"cannot load bindings file {path}{where}: {type(exc).__name__}: {exc}"
        ) from None
    return module


def load_bindings(paths: list[Path]) -> Bindings:
    """The tools defined at top level of each file, in name order; clashes are errors."""
    found: dict[str, tuple[ToolDefinition, Path]] = {}
    setups: list[Callable[[Any], None]] = []
    for index, path in enumerate(paths):
        module = _import_file(path.resolve(), index)
        setup = getattr(module, SETUP_HOOK, None)
        if callable(setup):
            setups.append(setup)
        tools = find_tools(module)  # type: ignore[arg-type]
        if not tools:
            raise BindingsError(
                f"no tools in {path}: define them at top level with @tool or define_tool"
            )
        for definition in tools:
            if definition.name in found:
                other = found[definition.name][1]
                raise BindingsError(
                    f"tool {definition.name!r} is defined in both {other} and {path}"
                )
            found[definition.name] = (definition, path)
    return Bindings([found[name][0] for name in sorted(found)], setups)
