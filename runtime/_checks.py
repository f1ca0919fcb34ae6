"""What every backend checks of a request before anything starts: the caller's mistakes."""

from __future__ import annotations

import typing

from runtime._contract import CallStyle, RunRequest
from runtime._errors import RuntimeUsageError
from runtime._json import json_problem

__all__ = ("check_request",)

_CALL_STYLES = typing.get_args(CallStyle)


def check_request(request: RunRequest, *, any_member: bool = False) -> None:
    """Raise ``RuntimeUsageError`` for what the caller got wrong in ``request``: not a
    ``RunRequest``, a binding name that is not a dotted identifier or a binding that is not
    callable, an input that is not an identifier or not lossless JSON, an unknown call style.
    With ``any_member``, a dotted name's last part may be any name without a dot (a property,
    ``tools["my-tool"]`` in TypeScript)."""
    if not isinstance(request, RunRequest):
        raise RuntimeUsageError(f"run() takes a RunRequest, got {type(request).__name__}")
    for name in request.bindings:
        parts = name.split(".") if isinstance(name, str) else [""]
        checked = parts[:-1] if any_member and len(parts) > 1 and parts[-1] else parts
        if not all(p.isidentifier() for p in checked):
            raise RuntimeUsageError(f"binding name {name!r} is not a dotted identifier")
        if not callable(request.bindings[name]):
            raise RuntimeUsageError(f"binding {name!r} is not callable")
    for name, value in request.inputs.items():
        if not isinstance(name, str) or not name.isidentifier():
            raise RuntimeUsageError(f"input name {name!r} is not an identifier")
        problem = json_problem(value)
        if problem is not None:
            raise RuntimeUsageError(f"input {name!r} is not lossless JSON: {problem}")
    if request.call_style not in _CALL_STYLES:
        raise RuntimeUsageError(f"call_style must be 'async' or 'sync', not {request.call_style!r}")
