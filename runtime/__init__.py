"""The code-runtime contract of dsh-code.

Imports are lazy (PEP 562): the child imports ``runtime._child`` without paying for
the rest, and ``import runtime`` alone loads nothing heavy.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from runtime._contract import (
        FAILURE_KINDS,
        AbortSignalLike,
        Binding,
        CallInfo,
        CallStyle,
        CodeRuntime,
        FailureKind,
        Limits,
        RunError,
        RunRequest,
        RunResult,
        RunStats,
        current_call,
    )
    from runtime._errors import (
        HoldCall,
        RuntimeClosedError,
        RuntimeEnvironmentError,
        RuntimeUsageError,
        ToolCallError,
    )
    from runtime._journal import (
        CallFailure,
        Decision,
        Journal,
        JournalCall,
        JournalError,
        PendingCall,
        Seeds,
    )
    from runtime._json import json_problem

__all__ = (
    "FAILURE_KINDS",
    "AbortSignalLike",
    "Binding",
    "CallFailure",
    "CallInfo",
    "CallStyle",
    "CodeRuntime",
    "Decision",
    "FailureKind",
    "HoldCall",
    "Journal",
    "JournalCall",
    "JournalError",
    "Limits",
    "PendingCall",
    "RunError",
    "RunRequest",
    "RunResult",
    "RunStats",
    "RuntimeClosedError",
    "RuntimeEnvironmentError",
    "RuntimeUsageError",
    "Seeds",
    "ToolCallError",
    "current_call",
    "json_problem",
)

_WHERE = {
    "HoldCall": "runtime._errors",
    **dict.fromkeys(
        (
            "CallFailure",
            "Decision",
            "Journal",
            "JournalCall",
            "JournalError",
            "PendingCall",
            "Seeds",
        ),
        "runtime._journal",
    ),
    "RuntimeClosedError": "runtime._errors",
    "RuntimeEnvironmentError": "runtime._errors",
    "RuntimeUsageError": "runtime._errors",
    "ToolCallError": "runtime._errors",
    "json_problem": "runtime._json",
}


def __getattr__(name: str) -> Any:
    if name not in __all__:
        raise AttributeError(f"module 'runtime' has no attribute {name!r}")
    value = getattr(importlib.import_module(_WHERE.get(name, "runtime._contract")), name)
    # Tracebacks and reprs name runtime.X; not the msgspec Structs, whose (string)
    # annotations tools evaluate in the namespace of the module their __module__ names.
    if (isinstance(value, type) and not hasattr(value, "__struct_fields__")) or (
        callable(value) and not isinstance(value, type)
    ):
        try:
            value.__module__ = __name__
        except (AttributeError, TypeError):
            pass
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
