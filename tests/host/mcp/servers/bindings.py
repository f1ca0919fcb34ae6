"""Bindings for ``dsh-code mcp`` in the tests: plain Python tools next to MCP ones."""

from __future__ import annotations

from host.tools import tool


@tool(concurrency_safe=True)
def multiply(a: int, b: int) -> int:
    """Multiply two integers."""
    return a * b


@tool
def greet(name: str, punctuation: str = "!") -> str:
    """Greet someone by name."""
    return f"hello, {name}{punctuation}"
