"""A pytest plugin: FastMCP's own CodeMode tests with ``DshSandboxProvider`` as every provider."""

from __future__ import annotations

import asyncio
import gc
import inspect
from typing import Any

import psutil
import pytest

_MONTY_SKIP = "pydantic-monty is required"


def pytest_configure(config: pytest.Config) -> None:
    """Make dsh-code FastMCP's default provider before the test modules import it."""
    from fastmcp.experimental.transforms import code_mode

    from host.mcp import DshSandboxProvider

    code_mode.MontySandboxProvider = DshSandboxProvider  # type: ignore[misc,assignment]


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The tests' exec-based provider becomes ours too; Monty-only tests run on ours."""
    from host.mcp import DshSandboxProvider

    for item in items:
        module = getattr(item, "module", None)
        if module is not None:
            for name in ("_UnsafeTestSandboxProvider", "MontySandboxProvider"):
                if hasattr(module, name):
                    setattr(module, name, DshSandboxProvider)
        node: Any = item
        while node is not None:
            node.own_markers[:] = [
                mark
                for mark in node.own_markers
                if not (mark.name == "skipif" and _MONTY_SKIP in str(mark.kwargs.get("reason")))
            ]
            node = node.parent


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem: pytest.Function) -> bool | None:
    """Run a coroutine test under plain ``asyncio.run``, then check that no process is left."""
    if not inspect.iscoroutinefunction(pyfuncitem.obj):
        return None
    names = pyfuncitem._fixtureinfo.argnames
    before = {p.pid for p in psutil.Process().children(recursive=True)}
    asyncio.run(pyfuncitem.obj(**{name: pyfuncitem.funcargs[name] for name in names}))
    gc.collect()
    left = [p for p in psutil.Process().children(recursive=True) if p.pid not in before]
    assert not left, f"processes left after the test: {[(p.pid, p.cmdline()) for p in left]}"
    return True
