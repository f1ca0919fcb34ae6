"""Bindings for the approval tests: ``remove`` needs a person's yes (a pre-execute ``Ask``)."""

from __future__ import annotations

from host.tools import Ask, ToolRegistry, tool

REMOVED: list[str] = []


@tool
def remove(path: str) -> str:
    """Remove a file (each call is approved by a person)."""
    return f"removed {path}"


@tool
def multiply(a: int, b: int) -> int:
    """Multiply two integers."""
    return a * b


def setup_registry(registry: ToolRegistry) -> None:
    """Ask before every ``remove``."""
    registry.pre_execute(
        lambda call, decision: (
            Ask(f"removing {call.args.get('path')}") if call.name == "remove" else None
        )
    )
