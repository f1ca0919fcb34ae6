"""The door for code-runtime backends (``host.sandbox``, ``host.cluster``, a future one).

What a backend needs to speak to a child and to judge what crosses from it: the wire
(tagged frames, length-prefixed), the program compiler, the lossless-JSON check, the
request check every backend makes, process facts from /proc, and the module-metadata
helper every package's ``__init__`` uses. Not for programs, nor for callers of a runtime:
those need only ``runtime``.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from runtime._budgets import BUDGET_KINDS, watch_request
    from runtime._checks import check_request
    from runtime._contain import searchable_by
    from runtime._errors import RECREATED_EXCEPTIONS, builtin_exception_name, tool_call_error
    from runtime._json import (
        MAX_DEPTH,
        JsonTooLarge,
        json_problem,
        json_values_bound,
        nests_deeper_than,
    )
    from runtime._ledger import CallLedger, Settled
    from runtime._procs import (
        ProcStat,
        children,
        descendants,
        is_stopped,
        kill_tree,
        process_cpu_ns,
        tree_cpu_ns,
    )
    from runtime._program import (
        HIDDEN_FILENAME,
        Policy,
        ProgramRejected,
        compile_program,
        is_async,
        source_lines,
    )
    from runtime._wire import (
        CHILD_FAILURES,
        HEADER,
        Call,
        ChildFailureKind,
        ChildMessage,
        Compiled,
        Done,
        Failed,
        FrameBuffer,
        HostMessage,
        Prepare,
        Ready,
        Reply,
        ReplyError,
        Start,
        State,
        TemplateConfig,
        encode_frame,
    )

__all__ = (
    "BUDGET_KINDS",
    "CHILD_FAILURES",
    "HEADER",
    "HIDDEN_FILENAME",
    "MAX_DEPTH",
    "RECREATED_EXCEPTIONS",
    "Call",
    "CallLedger",
    "ChildFailureKind",
    "ChildMessage",
    "Compiled",
    "Done",
    "Failed",
    "FrameBuffer",
    "HostMessage",
    "JsonTooLarge",
    "Policy",
    "Prepare",
    "ProcStat",
    "ProgramRejected",
    "Ready",
    "Reply",
    "ReplyError",
    "Settled",
    "Start",
    "State",
    "TemplateConfig",
    "builtin_exception_name",
    "check_request",
    "children",
    "compile_program",
    "descendants",
    "encode_frame",
    "fixup_module_metadata",
    "is_async",
    "is_stopped",
    "json_problem",
    "json_values_bound",
    "kill_tree",
    "nests_deeper_than",
    "process_cpu_ns",
    "searchable_by",
    "source_lines",
    "tool_call_error",
    "tree_cpu_ns",
    "watch_request",
)


_HOMES = {
    "BUDGET_KINDS": "_budgets",
    "watch_request": "_budgets",
    "check_request": "_checks",
    "CallLedger": "_ledger",
    "Settled": "_ledger",
    "searchable_by": "_contain",
    **dict.fromkeys(
        ("RECREATED_EXCEPTIONS", "builtin_exception_name", "tool_call_error"), "_errors"
    ),
    "MAX_DEPTH": "_json",
    "JsonTooLarge": "_json",
    "json_problem": "_json",
    "json_values_bound": "_json",
    "nests_deeper_than": "_json",
    **dict.fromkeys(
        (
            "ProcStat",
            "children",
            "descendants",
            "is_stopped",
            "kill_tree",
            "process_cpu_ns",
            "tree_cpu_ns",
        ),
        "_procs",
    ),
    **dict.fromkeys(
        (
            "HIDDEN_FILENAME",
            "Policy",
            "ProgramRejected",
            "compile_program",
            "is_async",
            "source_lines",
        ),
        "_program",
    ),
}


def __getattr__(name: str) -> Any:
    # Imported on first use (PEP 562): a package that needs only fixup_module_metadata loads
    # nothing else.
    if name not in __all__ or name == "fixup_module_metadata":
        raise AttributeError(f"module 'runtime.lowlevel' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"runtime.{_HOMES.get(name, '_wire')}"), name)
    if not hasattr(value, "__struct_fields__"):  # a Struct keeps its home: see runtime.__init__
        fixup_module_metadata(__name__, {"__all__": (name,), name: value})
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)


def fixup_module_metadata(module_name: str, namespace: dict[str, object]) -> None:
    """Make the public classes and functions named in ``namespace["__all__"]`` say they live
    in ``module_name`` (tracebacks and reprs then name the public path, not a private one);
    only objects of ``module_name``'s own package are touched."""
    package = module_name.split(".", maxsplit=1)[0]
    for name in namespace.get("__all__", ()):  # type: ignore[attr-defined]
        obj = namespace.get(name)
        if not (isinstance(obj, type) or callable(obj)):
            continue
        home = getattr(obj, "__module__", None)
        if isinstance(home, str) and (home == package or home.startswith(package + ".")):
            try:
                obj.__module__ = module_name
            except (AttributeError, TypeError):
                pass  # a builtin, or a slot without a writable __module__
