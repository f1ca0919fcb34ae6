"""``dsh-code run``'s event loop: MCP servers, the runtime, the run, the display, the signals."""

from __future__ import annotations

import json
import sys
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import anyio

from host.cli._mcp import open_mcp
from host.cli._output import Display, for_terminal, result_stream, status_text
from host.cli._session_log import SessionLog
from host.cli._setup import RuntimeOptions, make_registry
from host.cli._signals import Stopper, signal_name
from host.codemode import CodeModeConfig
from host.tools import AbortController, ToolRegistry, ToolResult
from runtime import RunError, RunResult, RunStats

if TYPE_CHECKING:
    from host.cli._bindings import Bindings
    from host.mcp import McpServerSpec

__all__ = ("RunOutcome", "RunPlan", "aborted_json", "execute")

_REFRESH_S = 0.1


@dataclass(frozen=True)
class RunPlan:
    """Everything ``dsh-code run`` decided before the event loop starts."""

    source: str
    bindings: Bindings
    config: CodeModeConfig
    json_output: bool
    session: SessionLog | None
    decide: bool | None
    mcp: list[McpServerSpec]
    mcp_timeout_ms: int
    runtime: RuntimeOptions


@dataclass
class RunOutcome:
    """What the loop leaves behind: the result (if the run got that far) and the signal."""

    result: RunResult | None = None
    signum: int | None = None
    logs: list[str] = field(default_factory=list)
    """The log lines so far, for an object written on a hard exit."""


def aborted_json(logs: list[str], signum: int, *, started: bool = True) -> dict[str, Any]:
    """The ``--json`` object of a run ended by a signal before it settled."""
    when = "" if started else " before the run started"
    return {
        "logs": list(logs),
        "error": {"kind": "aborted", "message": f"interrupted by {signal_name(signum)}{when}"},
    }


class _Asker:
    """Answers ``ask`` decisions: --yes/--no, else a prompt at a terminal, else no."""

    def __init__(self, decide: bool | None, display: Display | None) -> None:
        self.decide = decide
        self.display = display
        self.lock: anyio.Lock | None = None
        self.scopes: set[anyio.CancelScope] = set()
        self.stopped = False

    def stop(self) -> None:
        """A signal: every open and later question is answered no."""
        self.stopped = True
        for scope in self.scopes:
            scope.cancel()

    async def __call__(self, call: Any, decision: Any) -> bool:
        if self.decide is not None:
            return self.decide
        if self.stopped or not (sys.stdin is not None and sys.stdin.isatty()):
            return False
        if not sys.stderr.isatty():
            return False
        if self.lock is None:
            self.lock = anyio.Lock()
        prompt = getattr(decision, "prompt", "") or ""
        question = f"{prompt} — allow {call.name}?" if prompt else f"allow {call.name}?"
        answer = False
        with anyio.CancelScope() as scope:
            self.scopes.add(scope)
            try:
                async with self.lock:  # one question at a time, even for parallel calls
                    if self.display is None:
                        answer = await self._ask(question)
                    else:
                        with self.display.paused():
                            answer = await self._ask(question)
            finally:
                self.scopes.discard(scope)
        return answer and not self.stopped

    async def _ask(self, question: str) -> bool:
        def prompt() -> bool:
            sys.stderr.write(f"{for_terminal(question)} [y/N]: ")
            sys.stderr.flush()
            line = sys.stdin.readline()
            return line.strip().lower() in ("y", "yes")

        # A thread blocked on the terminal cannot be interrupted: a signal abandons it.
        return await anyio.to_thread.run_sync(prompt, abandon_on_cancel=True)


async def execute(plan: RunPlan, stopper: Stopper, outcome: RunOutcome) -> None:
    """Run the plan; a first signal aborts the run (or its start), and everything is cleaned up."""
    controller = AbortController()
    display = None if plan.json_output else Display(result_stream(), sys.stderr, status=True)
    asker = _Asker(plan.decide, display)
    started = [False]

    with anyio.CancelScope() as everything:

        def on_signal(signum: int) -> None:
            outcome.signum = signum
            asker.stop()
            if display is not None:
                display.notice(
                    f"dsh-code: {signal_name(signum)}: aborting the run "
                    "(Ctrl-C again to exit at once)"
                )
            if started[0]:
                controller.abort(f"interrupted by {signal_name(signum)}")
            else:
                everything.cancel()  # still starting (MCP servers, runtime): stop that

        try:
            async with stopper.watch(on_signal):
                registry = make_registry(plan.bindings, asker)
                async with open_mcp(plan.mcp, registry, plan.mcp_timeout_ms):
                    # From here a signal aborts the run rather than cancelling: a template
                    # cancelled while it starts prints its own traceback (BrokenPipeError).
                    started[0] = True
                    async with plan.runtime.runtime() as runtime:
                        if outcome.signum is not None:
                            return
                        outcome.result = await _run_program(
                            plan, registry, runtime, controller, display, outcome
                        )
        finally:
            if display is not None:
                display.close()


async def _run_program(
    plan: RunPlan,
    registry: ToolRegistry,
    runtime: Any,
    controller: AbortController,
    display: Display | None,
    outcome: RunOutcome,
) -> RunResult:
    from host.codemode import CodeMode

    config, session = plan.config, plan.session
    started = time.monotonic()
    state: dict[str, Any] = {"stats": None, "calls": 0}
    if session is not None:
        session.write(
            "run/start",
            program=plan.source,
            limits=config.limits,
            tools=[t.name for t in registry.visible()],
        )
        for event in ("tool/code-dispatch-start", "tool/code-dispatch", "result"):
            registry.on(event, _logger(session, event))

    def on_log(line: str) -> None:
        outcome.logs.append(line)
        if session is not None:
            session.write("log", line=line)
        if display is not None:
            display.line(line)

    def on_call(_tool: str, _result: ToolResult) -> None:
        state["calls"] += 1

    def on_progress(stats: RunStats) -> None:
        state["stats"] = stats

    def render() -> str:
        stats = state["stats"]
        compute = stats.compute_ms if stats is not None else 0.0
        return status_text(started, compute, config.limits.compute_ms, state["calls"])

    codemode = CodeMode(registry, runtime, config)
    async with anyio.create_task_group() as group:
        if display is not None and display.status_enabled:

            async def refresh() -> None:
                while True:
                    display.status(render())
                    await anyio.sleep(_REFRESH_S)

            group.start_soon(refresh)
        result = await codemode.run_program(
            plan.source,
            signal=controller.signal,
            on_log=on_log,
            on_call=on_call,
            on_progress=on_progress,
        )
        group.cancel_scope.cancel()
    if display is not None:
        display.close()
    if session is not None:
        session.write("run/end", result=result.to_json(), stats=result.stats)
    return result


def _logger(session: SessionLog, event: str) -> Any:
    def write(payload: Any) -> None:
        session.write(event, payload=_jsonable(payload))

    return write


def _jsonable(payload: Any) -> Any:
    to_dict = getattr(payload, "to_dict", None)
    if callable(to_dict):
        return to_dict()
    result = getattr(payload, "result", None)
    call = getattr(payload, "call", None)
    if result is not None and call is not None:
        return {"name": call.name, "call_id": call.call_id, "result": result.to_dict()}
    return payload


def render_failure(error: RunError, *, terminal: bool) -> str:
    """A failed run for a person: the kind, the message, the exit status."""
    title = error.kind + (f" ({error.budget})" if error.budget else "")
    message = for_terminal(error.message) if terminal else error.message
    lines = [f"✗ the program failed: {title}", message]
    if error.exit_status is not None:
        lines.append(f"exit status: {error.exit_status}")
    return "\n".join(lines)


def render_value(value: Any, *, terminal: bool) -> str:
    """A result for a person: indented JSON."""
    text = json.dumps(value, ensure_ascii=False, indent=2)
    return for_terminal(text) if terminal else text
