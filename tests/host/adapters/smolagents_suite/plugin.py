"""A pytest plugin: smolagents' own tests with ``DshExecutor`` wherever they make a local executor."""

from __future__ import annotations

from typing import Any

import pytest


def dsh_executor(*args: Any, **kwargs: Any) -> Any:
    """What the tests get for ``LocalPythonExecutor(...)``: a ``DshExecutor`` (the local
    executor's arguments are its import allow-list and in-process functions: none apply)."""
    from host.adapters.smolagents import DshExecutor

    return DshExecutor()


def pytest_configure(config: pytest.Config) -> None:
    """CodeAgent makes its executor from smolagents.agents' name: that name is ours now."""
    import smolagents.agents

    smolagents.agents.LocalPythonExecutor = dsh_executor


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The test modules' own ``LocalPythonExecutor`` makes ours too."""
    for item in items:
        module = getattr(item, "module", None)
        if module is not None and hasattr(module, "LocalPythonExecutor"):
            module.LocalPythonExecutor = dsh_executor
