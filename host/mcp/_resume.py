"""Paused runs over MCP: what a paused ``run_code`` tells the client, the ``resume_run`` tool,
and the journals the server keeps until the client resumes.

A run pauses when one of its calls is held: most often an approval the client did not give
within the run's wall budget (see ``_approvals``). The result says which calls wait and
why, with the run's id; ``resume_run`` with that id and ``approve`` replays the program in a
fresh child, its earlier calls answered from the journal (none runs again), the held calls
run (or are refused), in the client's own session. Only the client whose run paused may
resume it.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from typing import TYPE_CHECKING, Any, Final

from runtime import Journal, JournalError

if TYPE_CHECKING:
    from mcp.types import CallToolResult, Tool

    from runtime import Decision, RunResult

__all__ = ("RESUME_RUN", "PausedRuns", "decisions_of", "paused_text", "resume_tool")

RESUME_RUN: Final = "resume_run"
#: Paused runs a server keeps (the oldest are dropped first).
PAUSED_KEPT: Final = 256
_ARGS_SHOWN = 300


def resume_tool(session_parameter: dict[str, Any] | None) -> Tool:
    """The ``resume_run`` tool (``session_parameter``: a connection without MCP sessions
    names its session)."""
    from mcp.types import Tool, ToolAnnotations

    properties: dict[str, Any] = {
        "run_id": {"type": "string", "description": "the `run_id` of the paused run_code result"},
        "approve": {
            "type": "boolean",
            "description": "true runs the calls the program waits on; false refuses them "
            "(the program gets ToolCallError with code DENIED)",
        },
    }
    if session_parameter is not None:
        properties["session"] = session_parameter
    return Tool(
        name=RESUME_RUN,
        description=(
            "Continue a run_code program that paused on calls waiting for an approval: it "
            "goes on where it stopped (no call it made before runs again), with the calls it "
            "waits on run (approve: true) or refused (approve: false). Returns what run_code "
            "returns."
        ),
        input_schema={
            "type": "object",
            "properties": properties,
            "required": ["run_id", "approve"],
        },
        annotations=ToolAnnotations(title="Resume a paused program"),
    )


def paused_text(result: RunResult, session_note: str | None) -> CallToolResult:
    """A paused run as an MCP tool result: not an error; what it waits on, and how to go on."""
    from mcp.types import CallToolResult, TextContent

    assert result.journal is not None
    run_id = result.journal.run_id
    pending = [
        {
            "call_id": held.call_id,
            "tool": held.name.split(".", 1)[-1],
            "args": held.args,
            "reason": held.reason,
        }
        for held in result.pending
    ]
    lines = []
    if result.logs:
        lines.append("logs:\n" + "\n".join(result.logs))
    lines.append(f"paused (run {run_id}): the program waits on")
    for call in pending:
        args = json.dumps(call["args"], ensure_ascii=False)
        if len(args) > _ARGS_SHOWN:
            args = args[: _ARGS_SHOWN - 1] + "…"
        lines.append(f"- {call['tool']}({args}): {call['reason']}")
    lines.append(
        f'call {RESUME_RUN} with run_id "{run_id}" and approve true (run them) or false '
        "(refuse them) to continue it"
    )
    structured: dict[str, Any] = {
        "logs": list(result.logs),
        "paused": {"run_id": run_id, "pending": pending},
    }
    if session_note is not None:
        lines.append(session_note)
    return CallToolResult(
        content=[TextContent(type="text", text="\n".join(lines))],
        structured_content=structured,
        is_error=False,
    )


def decisions_of(journal: Journal, approve: bool) -> dict[str, Decision]:
    """The same decision for every call the journal holds."""
    verdict: Decision = "allow" if approve else "deny"
    return {held.call_id: verdict for held in journal.pending}


class PausedRuns:
    """The journals of a server's paused runs, each with the client it belongs to."""

    def __init__(self, kept: int = PAUSED_KEPT) -> None:
        self._runs: OrderedDict[str, tuple[Journal, str]] = OrderedDict()
        self._kept = kept

    def keep(self, journal: Journal, owner: str) -> None:
        """Keep a paused run's journal for ``owner`` (a client key) to resume."""
        self._runs.pop(journal.run_id, None)
        self._runs[journal.run_id] = (journal, owner)
        while len(self._runs) > self._kept:
            self._runs.popitem(last=False)

    def take(self, run_id: Any, owner: str) -> Journal:
        """The journal of ``owner``'s paused run ``run_id`` (forgotten here); ``JournalError``
        says why there is none."""
        kept = self._runs.get(run_id) if isinstance(run_id, str) else None
        if kept is None or kept[1] != owner:
            raise JournalError(
                f"no paused run {run_id!r} of this client here (it was resumed already, the "
                f"server restarted, or it was dropped: the last {self._kept} are kept)"
            )
        del self._runs[run_id]
        return kept[0]

    def __len__(self) -> int:
        return len(self._runs)
