"""What ``run_code`` gives back: a completed run's text, a failed run's error, a paused run's
value and text."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

import msgspec

from host.codemode._output import Sections, failure_text
from host.tools import ErrorCode, ToolError, ToolResult
from runtime import RunResult

__all__ = (
    "CodeRunFailed",
    "failure",
    "pause_reason",
    "paused_value",
    "render_paused",
)

_ARGS_SHOWN = 300


class CodeRunFailed(ToolError):
    """A run_code failure: the pipeline turns it into a ``CODE_RUN_FAILED`` result."""

    def __init__(self, message: str, *, content: str, meta: Mapping[str, Any]) -> None:
        super().__init__(
            message,
            code=ErrorCode.CODE_RUN_FAILED,
            name="CodeRunFailedError",
            content=content,
            meta=meta,
        )


def failure(result: RunResult, model_text: Callable[[str, Sections], str]) -> CodeRunFailed:
    """A failed run as the ``CODE_RUN_FAILED`` error ``run_code`` raises: its text as the
    model reads it (``model_text``), its facts and whole logs for the host."""
    error = result.error
    assert error is not None
    facts = msgspec.to_builtins(error)
    meta = {"code_run": {**facts, "logs": list(result.logs)}}  # whole: for the host, not the model
    text = model_text(*failure_text(error.kind, error.message, result.logs))
    return CodeRunFailed(f"{error.kind}: {error.message}", content=text, meta=meta)


def pause_reason(result: ToolResult) -> str:
    """Why a ``PAUSED`` result holds its call."""
    meta: Any = result.meta
    paused = meta.get("paused") if isinstance(meta, Mapping) else None
    reason = paused.get("reason") if isinstance(paused, Mapping) else None
    if isinstance(reason, str):
        return reason
    return result.error.message if result.error is not None else "paused"


def paused_value(result: RunResult) -> dict[str, Any]:
    """``run_code``'s value for a paused run: its logs, and what it waits on."""
    assert result.journal is not None
    pending = [
        {
            "call_id": call.call_id,
            "tool": call.name.split(".", 1)[-1],
            "args": call.args,
            "reason": call.reason,
        }
        for call in result.pending
    ]
    return {
        "logs": list(result.logs),
        "paused": {"run_id": result.journal.run_id, "pending": pending},
    }


def render_paused(value: Mapping[str, Any]) -> str:
    """A paused run for the model: its logs, then each call it waits on and why."""
    parts = []
    if value.get("logs"):
        parts.append("logs:\n" + "\n".join(value["logs"]))
    paused = value["paused"]
    lines = [f"paused (run {paused['run_id']}): the program waits on"]
    for call in paused["pending"]:
        args = json.dumps(call["args"], ensure_ascii=False)
        if len(args) > _ARGS_SHOWN:
            args = args[: _ARGS_SHOWN - 1] + "…"
        lines.append(f"- {call['tool']}({args}) [{call['call_id']}]: {call['reason']}")
    lines.append(
        "It resumes where it stopped once decided (no earlier call runs again); nothing more "
        "is needed from you for it now."
    )
    parts.append("\n".join(lines))
    return "\n".join(parts)
