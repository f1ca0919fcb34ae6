"""The public surface of host.tools: exports, their module name, and a light import."""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys
import types
from pathlib import Path

import pytest

import host.tools

MODULES = sorted(path.stem for path in Path(host.tools.__file__).parent.glob("_[!_]*.py"))


def test_all_matches_the_public_names() -> None:
    public = {
        name
        for name, value in vars(host.tools).items()
        if not name.startswith("_")
        and not isinstance(value, types.ModuleType)
        and name != "annotations"
    }
    assert isinstance(host.tools.__all__, tuple)
    assert len(set(host.tools.__all__)) == len(host.tools.__all__)
    assert set(host.tools.__all__) == public


def test_exported_classes_and_functions_read_host_tools() -> None:
    for name in host.tools.__all__:
        value = getattr(host.tools, name)
        if isinstance(value, type | types.FunctionType):
            assert value.__module__ == "host.tools", name


def test_import_does_not_drag_in_other_packages() -> None:
    code = (
        "import sys, host.tools\n"
        "bad = [m for m in ('host.sandbox', 'host.codemode', 'sdkgen', 'typer', 'rich',"
        " 'jsonschema', 'hypothesis', 'trio') if m in sys.modules]\n"
        "print(bad)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert out.stdout.strip() == "[]"


def _defined(tree: ast.Module) -> set[str]:
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names |= {t.id for t in node.targets if isinstance(t, ast.Name)}
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
    return names


@pytest.mark.parametrize("stem", MODULES)
def test_each_private_module_says_what_it_is_and_exports_only_its_own_names(stem: str) -> None:
    module = importlib.import_module(f"host.tools.{stem}")
    assert module.__doc__ and module.__doc__.strip(), stem
    assert isinstance(module.__all__, tuple), stem
    assert len(set(module.__all__)) == len(module.__all__), stem
    tree = ast.parse(Path(module.__file__ or "").read_text(encoding="utf-8"))
    assert set(module.__all__) <= _defined(tree), stem
