"""Every import the installed code makes is a declared dependency, and every extra it names exists."""

from __future__ import annotations

import ast
import importlib.metadata
import re
import sys
import tomllib
from collections.abc import Iterator
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("runtime", "host", "sdkgen", "dsh_code")

#: Modules that may import an extra's packages (and only those modules): prefix -> extra.
EXTRA_OF = {
    "host.mcp": "mcp",
    "host.adapters._smolagents": "smolagents",
    "host.adapters._pydantic_ai": "pydantic-ai",
    "host.adapters._langgraph": "langgraph",
    "host.cluster": "ray",
}
#: Imported only when the caller's own event loop is trio's, so the caller has it.
CALLERS_OWN = frozenset({"trio"})
#: A declared distribution whose modules another one ships (fastmcp 4 pins fastmcp-slim).
SHIPPED_BY = {"fastmcp-slim": "fastmcp"}


def _normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _requirement_name(requirement: str) -> str:
    found = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", requirement)
    assert found is not None, requirement
    return _normalize(found.group(1))


@cache
def _project() -> dict[str, object]:
    with (ROOT / "pyproject.toml").open("rb") as file:
        project: dict[str, object] = tomllib.load(file)["project"]
    return project


def _core() -> set[str]:
    dependencies = _project()["dependencies"]
    assert isinstance(dependencies, list)
    return {_requirement_name(r) for r in dependencies}


def _extras() -> dict[str, set[str]]:
    extras = _project()["optional-dependencies"]
    assert isinstance(extras, dict)
    return {name: {_requirement_name(r) for r in reqs} for name, reqs in extras.items()}


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _sources() -> dict[str, Path]:
    found: dict[str, Path] = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            found[_module_name(path)] = path
    return found


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def runtime_imports(source: str) -> Iterator[str]:
    """The top-level names a module imports when it runs (``TYPE_CHECKING`` blocks left out,
    ``importlib.import_module("x")`` counted)."""
    todo: list[ast.AST] = [ast.parse(source)]
    while todo:
        node = todo.pop()
        if isinstance(node, ast.If) and _is_type_checking(node):
            todo.extend(node.orelse)
            continue
        if isinstance(node, ast.Import):
            yield from (alias.name.partition(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            yield node.module.partition(".")[0]
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "import_module"
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            yield node.args[0].value.partition(".")[0]
        todo.extend(ast.iter_child_nodes(node))


def _third_party(module: str) -> set[str]:
    names = set(runtime_imports(_sources()[module].read_text(encoding="utf-8")))
    ours = {*PACKAGES}
    return {n for n in names if n not in sys.stdlib_module_names and n not in ours}


@cache
def _distributions() -> dict[str, list[str]]:
    return dict(importlib.metadata.packages_distributions())


def _allowed(module: str) -> set[str]:
    allowed = set(_core())
    for prefix, extra in EXTRA_OF.items():
        if module == prefix or module.startswith(prefix + "."):
            allowed |= _extras()[extra]
    return allowed


def test_the_import_scanner_sees_what_runs_and_skips_type_checking() -> None:
    source = (
        "import a.b\nfrom c import d\nfrom . import e\nif TYPE_CHECKING:\n    import f\n"
        "else:\n    import g\ndef h():\n    import i\n    importlib.import_module('j.k')\n"
    )
    assert sorted(runtime_imports(source)) == ["a", "c", "g", "i", "j"]


@pytest.mark.parametrize("module", sorted(_sources()))
def test_every_import_is_a_declared_dependency(module: str) -> None:
    undeclared = []
    for name in sorted(_third_party(module) - CALLERS_OWN):
        distributions = _distributions().get(name)
        assert distributions, f"{module} imports {name}, which no installed distribution provides"
        providers = {_normalize(d) for d in distributions}
        providers |= {SHIPPED_BY[p] for p in providers if p in SHIPPED_BY}
        if not providers & _allowed(module):
            undeclared.append(f"{name} (from {', '.join(distributions)})")
    assert undeclared == [], f"{module} imports undeclared packages: {undeclared}"


def test_the_extras_map_names_extras_that_exist() -> None:
    assert set(EXTRA_OF.values()) <= set(_extras())


def _named_extras() -> Iterator[tuple[str, str]]:
    """Every ``dsh-code[extra]`` the sources, the README and the examples tell users to install."""
    files = [ROOT / "README.md", *(p for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.py"))]
    files += sorted((ROOT / "examples").rglob("*.py"))
    for path in files:
        for match in re.finditer(r"dsh-code\[([^\]]+)\]", path.read_text(encoding="utf-8")):
            for extra in match.group(1).split(","):
                yield path.relative_to(ROOT).as_posix(), extra.strip()


def test_every_extra_a_message_names_exists() -> None:
    named = list(_named_extras())
    assert ("README.md", "mcp") in named
    unknown = sorted({f"{path}: {extra}" for path, extra in named if extra not in _extras()})
    assert unknown == []
