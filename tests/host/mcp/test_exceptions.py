"""host.mcp's exceptions: one base class, each also the builtin kind callers may catch."""

from __future__ import annotations

import host.mcp
from host.mcp import (
    ApprovalUnavailable,
    McpConfigError,
    McpError,
    McpServerError,
    McpUnavailableError,
)


def test_every_exception_of_the_package_derives_from_one_base() -> None:
    exported = [
        obj
        for name in host.mcp.__all__
        if isinstance(obj := getattr(host.mcp, name), type) and issubclass(obj, BaseException)
    ]
    assert set(exported) == {
        McpError,
        McpConfigError,
        McpServerError,
        McpUnavailableError,
        ApprovalUnavailable,
    }
    assert all(issubclass(cls, McpError) for cls in exported)
    assert issubclass(McpUnavailableError, ImportError)
    assert issubclass(McpConfigError, ValueError)
    assert issubclass(McpServerError, RuntimeError)
    assert all(cls.__module__ == "host.mcp" for cls in exported)
    for cls in exported:
        assert cls.__name__ in (host.mcp._exceptions.__doc__ or "")  # the tree names each
