"""dsh_code, the one import home: complete, the same objects, and light to import."""

from __future__ import annotations

import ast
import importlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

import dsh_code

SOURCE = Path(dsh_code.__file__)
#: The packages dsh_code gives whole; the others it gives their entry points.
WHOLE = ("runtime", "host.sandbox", "host.codemode", "host.tools")
FRAMEWORKS = (
    "smolagents",
    "pydantic_ai",
    "langgraph",
    "langgraph_codeact",
    "agents",
    "ray",
    "mcp",
    "fastmcp",
    "typer",
    "rich",
    "pydantic",
)


def _loaded_after(code: str) -> set[str]:
    """The modules a fresh interpreter holds after running ``code`` (beyond its start-up)."""
    probe = (
        "import sys, json\nbefore = set(sys.modules)\n"
        f"{code}\n"
        "print(json.dumps(sorted(set(sys.modules) - before)))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True
    )
    loaded: list[str] = json.loads(done.stdout)
    return set(loaded)


def test_importing_dsh_code_loads_nothing_but_the_standard_library() -> None:
    loaded = _loaded_after("import dsh_code")
    ours = {m for m in loaded if m.partition(".")[0] not in sys.stdlib_module_names}
    assert ours == {"dsh_code"}


def test_the_runtime_code_mode_and_tools_load_no_framework() -> None:
    names = "SubprocessRuntime, RunRequest, Limits, CodeMode, ToolRegistry, tool, schema"
    loaded = _loaded_after(f"from dsh_code import {names}\nimport dsh_code\ndsh_code.DshExecutor")
    assert {m.partition(".")[0] for m in loaded} & set(FRAMEWORKS) == set()
    assert "host.adapters.smolagents" in loaded


@pytest.mark.parametrize("home", WHOLE)
def test_every_public_name_of_the_core_packages_is_here(home: str) -> None:
    missing = set(importlib.import_module(home).__all__) - set(dsh_code.__all__)
    assert missing == set()


@pytest.mark.parametrize("name", dsh_code.__all__)
def test_each_name_is_the_object_of_its_home(name: str) -> None:
    home = importlib.import_module(dsh_code._HOMES[name])
    assert name in home.__all__
    assert getattr(dsh_code, name) is getattr(home, name)


def test_all_the_homes_and_the_type_checking_imports_agree() -> None:
    tree = ast.parse(SOURCE.read_text(encoding="utf-8"))
    typed: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module != "__future__":
            if node.module in ("typing",):
                continue
            typed.update((alias.name, node.module) for alias in node.names)
    assert typed == dsh_code._HOMES
    assert sorted(dsh_code.__all__) == sorted(dsh_code._HOMES)
    assert len(set(dsh_code.__all__)) == len(dsh_code.__all__)


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no_such_name"):
        getattr(dsh_code, "no_such_name")  # noqa: B009


def test_python_m_dsh_code_is_the_command() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "dsh_code", "--version"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("dsh-code ")


def test_the_module_is_what_its_generator_writes() -> None:
    # Every public name a core package adds reaches dsh_code when the generator runs again.
    root = SOURCE.parent.parent
    done = subprocess.run(
        [sys.executable, str(root / "scripts" / "gen_dsh_code.py"), "--check"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
