"""The layering, module-size and no-import-circle rules, checked on the ASTs of the sources."""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("runtime", "host", "sdkgen", "dsh_code")
MAX_LINES = 600


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


@cache
def _modules() -> dict[str, Path]:
    """Every source module by dotted name (a package is its ``__init__``)."""
    found: dict[str, Path] = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            found[_module_name(path)] = path
    return found


def _is_package(name: str) -> bool:
    return _modules()[name].name == "__init__.py"


def _imports(name: str) -> Iterator[str]:
    """The absolute names a module imports anywhere (``TYPE_CHECKING`` and function bodies too)."""
    tree = ast.parse(_modules()[name].read_text(encoding="utf-8"))
    package = name if _is_package(name) else name.rpartition(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                target = ".".join([*base, node.module] if node.module else base)
            else:
                assert node.module is not None
                target = node.module
            yield target
            # ``from pkg import mod`` imports the submodule ``pkg.mod`` as well
            yield from (f"{target}.{alias.name}" for alias in node.names)


def _edges(name: str) -> set[str]:
    """The source modules ``name`` imports (names outside the packages dropped)."""
    return {target for target in _imports(name) if target in _modules() and target != name}


def _top(target: str) -> str:
    return target.partition(".")[0]


def _in(package: str) -> list[str]:
    return [name for name in _modules() if _top(name) == package]


def test_the_source_packages_are_found() -> None:
    assert {"runtime", "host.tools._registry", "sdkgen"} <= set(_modules())


@pytest.mark.parametrize("name", _in("runtime"))
def test_runtime_imports_neither_host_nor_sdkgen(name: str) -> None:
    bad = sorted({t for t in _imports(name) if _top(t) in {"host", "sdkgen"}})
    assert bad == [], f"{name} imports {bad}"


@pytest.mark.parametrize("name", _in("sdkgen"))
def test_sdkgen_imports_only_the_standard_library(name: str) -> None:
    bad = sorted({t for t in _imports(name) if _top(t) not in {"sdkgen", *sys.stdlib_module_names}})
    assert bad == [], f"{name} imports {bad}"


@pytest.mark.parametrize("name", _in("host"))
def test_host_uses_runtime_through_its_public_doors(name: str) -> None:
    # ``runtime`` for callers, ``runtime.lowlevel`` for backends: nothing private, so the
    # runtime's insides can move without breaking a backend.
    private = {t for t in _imports(name) if t in _modules() and _top(t) == "runtime"}
    bad = sorted(private - {"runtime", "runtime.lowlevel"})
    assert bad == [], f"{name} imports {bad}"


@pytest.mark.parametrize("name", [n for n in _modules() if _top(n) != "dsh_code"])
def test_only_users_import_dsh_code(name: str) -> None:
    # dsh_code is the users' door over the packages: a package importing it would turn the
    # door into a dependency (and a circle).
    bad = sorted({t for t in _imports(name) if _top(t) == "dsh_code"})
    assert bad == [], f"{name} imports {bad}"


@pytest.mark.parametrize("name", _in("dsh_code"))
def test_dsh_code_imports_only_public_modules(name: str) -> None:
    private = sorted(
        t
        for t in _imports(name)
        if t in _modules()
        and _top(t) != "dsh_code"
        and any(p.startswith("_") for p in t.split("."))
    )
    assert private == [], f"{name} imports {private}"


def _size_cases() -> list[str]:
    return [path.relative_to(ROOT).as_posix() for path in _modules().values()]


@pytest.mark.parametrize("relative", _size_cases())
def test_module_is_at_most_600_lines(relative: str) -> None:
    lines = len((ROOT / relative).read_text(encoding="utf-8").splitlines())
    assert lines <= MAX_LINES, f"{relative} has {lines} lines"


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one node (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:  # recursion is fine: the graph is a few hundred modules
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for successor in sorted(graph[node]):
            if successor not in index:
                visit(successor)
                low[node] = min(low[node], low[successor])
            elif successor in on_stack:
                low[node] = min(low[node], index[successor])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(found)


def test_the_circle_finder_finds_circles() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    assert _circles(graph) == [["a", "b", "c"]]
    assert _circles({"a": {"b"}, "b": set()}) == []


def test_no_modules_import_each_other_in_a_circle() -> None:
    graph = {name: _edges(name) for name in _modules()}
    assert _circles(graph) == []


def _package_of(name: str) -> str:
    return name if _is_package(name) else name.rpartition(".")[0]


def test_no_packages_import_each_other_in_a_circle() -> None:
    graph: dict[str, set[str]] = {}
    for name in _modules():
        source = _package_of(name)
        graph.setdefault(source, set())
        # a package's parent importing it (``host`` re-exporting ``host.tools``) is not a circle
        graph[source] |= {
            _package_of(target)
            for target in _edges(name)
            if _package_of(target) != source and not source.startswith(_package_of(target) + ".")
        }
    assert _circles(graph) == []
