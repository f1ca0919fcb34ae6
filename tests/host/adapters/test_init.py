"""The public surface of host.adapters: exports, module names, and imports that load no framework."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

import host.adapters

FRAMEWORKS = ("smolagents", "pydantic_ai", "langgraph", "langgraph_codeact", "langchain_core")


def _loaded_after(statement: str) -> list[str]:
    code = (
        f"import sys, json\n{statement}\n"
        f"print(json.dumps(sorted(m for m in {FRAMEWORKS!r} if m in sys.modules)))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    loaded: list[str] = json.loads(out.stdout)
    return loaded


def test_all_is_a_tuple_of_what_the_package_offers() -> None:
    assert host.adapters.__all__ == ("shared_runtime",)
    assert host.adapters.shared_runtime.__module__ == "host.adapters"


@pytest.mark.parametrize(
    "statement",
    [
        "import host.adapters",
        "import host.adapters.pydantic_ai",
        "import host.adapters.langgraph",
        "from host.adapters.langgraph import dsh_eval_fn",
        "import host.mcp",
    ],
)
def test_imports_load_no_framework(statement: str) -> None:
    assert _loaded_after(statement) == []


def test_the_smolagents_module_loads_smolagents_only_when_an_executor_is_made() -> None:
    assert _loaded_after("import host.adapters.smolagents") == []
    made = "from host.adapters.smolagents import DshExecutor\nDshExecutor().cleanup()"
    assert _loaded_after(made) == ["smolagents"]


def test_public_names_read_their_public_module() -> None:
    from host.adapters.langgraph import dsh_eval_fn
    from host.adapters.pydantic_ai import DshCodeToolset
    from host.adapters.smolagents import DshExecutor

    assert DshExecutor.__module__ == "host.adapters.smolagents"
    assert DshCodeToolset.__module__ == "host.adapters.pydantic_ai"
    assert dsh_eval_fn.__module__ == "host.adapters.langgraph"
