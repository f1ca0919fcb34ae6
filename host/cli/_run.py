"""``dsh-code run``'s event loop: MCP servers, the runtime, the run, the display, the signals."""

from __future__ import annotations

import json
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio

from host.cli._errors import UsageFailure
from host.cli._mcp import MCP_START_TIMEOUT_MS, open_mcp
from host.cli._output import Display, for_terminal, is_terminal, result_stream, status_text
from host.cli._session_file import (
    SessionFileError,
    read_session_file,
    write_session_file,
)
from host.cli._session_log import SessionLog
from host.cli._setup import RuntimeOptions, make_registry
from host.cli._signals import Stopper, abort_notice, signal_name
from host.codemode import CodeMode, CodeModeConfig
from host.sandbox._session import SessionRuntime
from host.tools import AbortController, Deny, Pause, ToolRegistry, ToolResult
from runtime import CodeRuntime, RunError, RunResult, RunStats

if TYPE_CHECKING:
    from host.cli._bindings import Bindings
    from host.cli._journal_file import RunSettings
    from host.mcp import McpServerSpec
    from host.sandbox import Session
    from runtime import Decision, Journal

__all__ = (
    "RunOutcome",
    "RunPlan",
    "SessionPlan",
    "aborted_json",
    "can_ask",
    "execute",
    "load_state",
    "no_terminal_denial",
    "open_session",
    "render_dropped",
    "run_with_display",
    "save_state",
    "state_hint",
)


@dataclass(frozen=True)
class SessionPlan:
    """``--session FILE``: where the state lives, what it held when the command started."""

    path: Path
    state: bytes | None
    max_state_bytes: int
    commit_on_failure: bool = False
    """Keep what a failed run assigned before its exception (the REPL)."""

    def too_big(self) -> RunResult | None:
        """The failed run of a state file over ``--max-state-bytes`` (no child is started)."""
        if self.state is None or len(self.state) <= self.max_state_bytes:
            return None
        message = (
            f"the session file {self.path} is over --max-state-bytes ({self.max_state_bytes}); "
            "raise the cap, or start a new session with another file"
        )
        return RunResult(logs=[], error=RunError(kind="state", message=message))


def load_state(path: Path | None, max_state_bytes: int) -> SessionPlan | None:
    """The ``--session`` plan (None without the flag); a file we cannot use is a usage error."""
    if path is None:
        return None
    try:
        state = read_session_file(path, max_state_bytes)
    except SessionFileError as exc:
        raise UsageFailure(str(exc)) from None
    return SessionPlan(path, state, max_state_bytes)


def save_state(plan: SessionPlan | None, outcome: RunOutcome) -> str | None:
    """Write a successful run's state back to the session file; why it could not be."""
    if plan is None or outcome.state is None:
        return None
    try:
        write_session_file(plan.path, outcome.state)
    except SessionFileError as exc:
        return str(exc)
    return None


def state_hint(error: RunError | None, path: Path | None) -> str | None:
    """What to do when the state a session file holds cannot be restored (every run of
    the session would fail the same way)."""
    if error is None or error.kind != "state" or path is None or "restored" not in error.message:
        return None
    return (
        f"dsh-code: the state in {path} cannot be used; remove the file (or give another "
        "--session FILE) to start a new session"
    )


def open_session(runtime: CodeRuntime, plan: SessionPlan) -> Session:
    """A session of ``runtime`` that starts from the plan's state."""
    opener = getattr(runtime, "session", None)
    if opener is None:
        raise UsageFailure(
            f"{type(runtime).__name__} keeps no sessions: --session needs a local runtime"
        )
    session: Session = opener(
        state=plan.state or None,
        max_state_bytes=plan.max_state_bytes,
        commit_on_failure=plan.commit_on_failure,
    )
    return session


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
    state: SessionPlan | None = None
    mcp_start_timeout_ms: int = MCP_START_TIMEOUT_MS
    full_logs: bool = False
    """At a terminal, every log line (else a head and a tail past a screenful)."""
    journal: Path | None = None
    """``--journal FILE``: where the run's journal goes (and an unanswerable ask pauses)."""
    settings: RunSettings | None = None
    """What the journal file keeps of the flags, for ``resume``."""
    resume: tuple[Journal, dict[str, Decision]] | None = None
    """``resume``: the journal to replay, and the decisions for its held calls."""


@dataclass
class RunOutcome:
    """What the loop leaves behind: the result (if the run got that far) and the signal."""

    result: RunResult | None = None
    signum: int | None = None
    logs: list[str] = field(default_factory=list)
    """The log lines so far, for an object written on a hard exit."""
    state: bytes | None = None
    """The session's new state, after a successful run with ``--session``."""


def aborted_json(logs: list[str], signum: int, *, started: bool = True) -> dict[str, Any]:
    """The ``--json`` object of a run ended by a signal before it settled."""
    when = "" if started else " before the run started"
    return {
        "logs": list(logs),
        "error": {"kind": "aborted", "message": f"interrupted by {signal_name(signum)}{when}"},
    }


def can_ask() -> bool:
    """Whether a person can be asked: standard input and standard error are a terminal."""
    return is_terminal(sys.stdin) and is_terminal(sys.stderr)


def no_terminal_denial(decision: Any) -> Deny:
    """The denial of an ``ask`` that no terminal can answer, saying how to decide it."""
    prompt = getattr(decision, "prompt", "") or ""
    needed = f"approval needed ({prompt})" if prompt else "approval needed"
    return Deny(
        f"{needed}, but no terminal can answer (standard input or error is not one): "
        "run dsh-code with --yes to allow such calls, or --no to deny them without asking"
    )


class _Asker:
    """Answers ``ask`` decisions: --yes/--no, else a prompt at a terminal, else no. With a
    journal (``can_pause``) nobody at a terminal, or an answer ``p``, holds the call: the run
    pauses, to be continued by ``dsh-code resume``."""

    def __init__(
        self, decide: bool | None, display: Display | None, can_pause: bool = False
    ) -> None:
        self.decide = decide
        self.display = display
        self.can_pause = can_pause
        self.lock: anyio.Lock | None = None
        self.scopes: set[anyio.CancelScope] = set()
        self.stopped = False

    def stop(self) -> None:
        """A signal: every open and later question is answered no."""
        self.stopped = True
        for scope in self.scopes:
            scope.cancel()

    async def __call__(self, call: Any, decision: Any) -> bool | Deny | Pause:
        if self.decide is not None:
            return self.decide
        if self.stopped:
            return False
        if not can_ask():
            if self.can_pause:
                return Pause("nobody at a terminal to answer: approve it with dsh-code resume")
            return no_terminal_denial(decision)
        if self.lock is None:
            self.lock = anyio.Lock()
        prompt = getattr(decision, "prompt", "") or ""
        question = f"{prompt} — allow {call.name}?" if prompt else f"allow {call.name}?"
        answer: bool | Pause = False
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
        return False if self.stopped else answer

    async def _ask(self, question: str) -> bool | Pause:
        choices = "[y/N/p]" if self.can_pause else "[y/N]"

        def prompt() -> bool | Pause:
            sys.stderr.write(f"{for_terminal(question)} {choices}: ")
            sys.stderr.flush()
            line = sys.stdin.readline().strip().lower()
            if self.can_pause and line in ("p", "pause"):
                return Pause("paused at the terminal: approve it with dsh-code resume")
            return line in ("y", "yes")

        # A thread blocked on the terminal cannot be interrupted: a signal abandons it.
        return await anyio.to_thread.run_sync(prompt, abandon_on_cancel=True)


async def execute(plan: RunPlan, stopper: Stopper, outcome: RunOutcome) -> None:
    """Run the plan; a first signal aborts the run (or its start), and everything is cleaned up."""
    controller = AbortController()
    display = None if plan.json_output else Display(result_stream(), sys.stderr, status=True)
    if display is not None and not plan.full_logs:
        where = f'{plan.session.path} (its "log" records)' if plan.session is not None else None
        display.limit_logs(where)
    asker = _Asker(plan.decide, display, can_pause=plan.journal is not None)
    started = [False]

    with anyio.CancelScope() as everything:

        def on_signal(signum: int) -> None:
            outcome.signum = signum
            asker.stop()
            if display is not None:
                display.notice(abort_notice(signum))
            if started[0]:
                controller.abort(f"interrupted by {signal_name(signum)}")
            else:
                everything.cancel()  # still starting (MCP servers, runtime): stop that

        try:
            async with stopper.watch(on_signal):
                registry = make_registry(plan.bindings, asker)
                async with open_mcp(
                    plan.mcp, registry, plan.mcp_timeout_ms, plan.mcp_start_timeout_ms
                ):
                    # From here a signal aborts the run rather than cancelling: a template
                    # cancelled while it starts prints its own traceback (BrokenPipeError).
                    started[0] = True
                    async with plan.runtime.runtime() as runtime:
                        if outcome.signum is not None:
                            return
                        await _run_program(plan, registry, runtime, controller, display, outcome)
        finally:
            if display is not None:
                display.close()


async def _run_program(
    plan: RunPlan,
    registry: ToolRegistry,
    runtime: CodeRuntime,
    controller: AbortController,
    display: Display | None,
    outcome: RunOutcome,
) -> None:
    if plan.state is None:
        codemode = CodeMode(registry, runtime, plan.config)
        outcome.result = await run_with_display(
            codemode, plan.source, controller, display, outcome.logs, plan.session, plan.resume
        )
        return
    failed = plan.state.too_big()
    if failed is not None:
        outcome.result = failed
        return
    session = open_session(runtime, plan.state)
    codemode = CodeMode(registry, SessionRuntime(runtime, session), plan.config)
    outcome.result = await run_with_display(
        codemode, plan.source, controller, display, outcome.logs, plan.session, plan.resume
    )
    if outcome.result.ok:
        outcome.state = session.state


async def run_with_display(
    codemode: CodeMode,
    source: str,
    controller: AbortController,
    display: Display | None,
    logs: list[str],
    session: SessionLog | None = None,
    resume: tuple[Journal, dict[str, Decision]] | None = None,
) -> RunResult:
    """Run ``source`` through code mode: logs shown live (and kept), a status line, the log
    (``resume``: replay a journal of it first)."""
    config, registry = codemode.config, codemode.registry
    started = time.monotonic()
    state: dict[str, Any] = {"stats": None, "calls": 0}
    if session is not None:
        session.write(
            "run/start",
            program=source,
            limits=config.limits,
            tools=[t.name for t in registry.visible()],
        )
        for event in ("tool/code-dispatch-start", "tool/code-dispatch", "result"):
            registry.on(event, _logger(session, event))

    def on_log(line: str) -> None:
        logs.append(line)
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

    async with anyio.create_task_group() as group:
        if display is not None and display.status_enabled:

            async def refresh() -> None:
                while True:
                    display.status(render())
                    await anyio.sleep(_REFRESH_S)

            group.start_soon(refresh)
        result = await codemode.run_program(
            source,
            signal=controller.signal,
            on_log=on_log,
            on_call=on_call,
            on_progress=on_progress,
            resume=resume[0] if resume is not None else None,
            decisions=resume[1] if resume is not None else None,
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


def render_dropped(dropped: dict[str, str]) -> str:
    """The names a session could not carry to the next run, each with its reason."""
    lines = ["dsh-code: not carried to the next run:"]
    lines.extend(f"  {name}: {reason}" for name, reason in sorted(dropped.items()))
    return "\n".join(lines)


def render_value(value: Any, *, terminal: bool, is_repr: bool = False) -> str:
    """A result for a person: indented JSON, or a bare expression's repr as Python shows it."""
    text = value if is_repr else json.dumps(value, ensure_ascii=False, indent=2)
    return for_terminal(text) if terminal else text
