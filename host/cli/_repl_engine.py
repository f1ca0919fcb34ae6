"""``dsh-code repl``'s event loop, on a thread of its own: the MCP servers, the runtime, the
session, and one run per input. The terminal stays with the main thread: what a run needs
from the person (an ``ask`` decision) is posted to it as an event and answered from there.
"""

from __future__ import annotations

import contextlib
import queue
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio

from host.cli._mcp import MCP_START_TIMEOUT_MS, open_mcp
from host.cli._output import Display, result_stream
from host.cli._run import (
    SessionPlan,
    can_ask,
    no_terminal_denial,
    open_session,
    run_with_display,
)
from host.cli._setup import RuntimeOptions, make_registry
from host.codemode import CodeMode, CodeModeConfig
from host.sandbox._session import SessionRuntime
from host.tools import AbortController, Deny

if TYPE_CHECKING:
    from host.cli._bindings import Bindings
    from host.mcp import McpServerSpec
    from host.sandbox import Session
    from runtime import RunResult

__all__ = ("Question", "ReplEngine", "ReplPlan")


@dataclass(frozen=True)
class ReplPlan:
    """Everything ``dsh-code repl`` decided before its event loop starts."""

    bindings: Bindings
    config: CodeModeConfig
    servers: list[McpServerSpec]
    mcp_timeout_ms: int
    runtime: RuntimeOptions
    decide: bool | None
    state: bytes | None
    max_state_bytes: int
    session_file: Path | None = None
    mcp_start_timeout_ms: int = MCP_START_TIMEOUT_MS


class Question:
    """An ``ask`` decision for the person at the terminal (answered by the main thread)."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.answer = False
        self.done = anyio.Event()

    def set(self, answer: bool) -> None:
        """The answer (called on the loop's thread)."""
        self.answer = answer
        self.done.set()


class ReplEngine:
    """The loop's side: ``serve`` holds the resources; ``run`` runs one input in the session.

    ``events`` (a thread-safe queue the main thread reads) gets ``("ready", tool_count)``
    once everything has started and ``("ask", Question)`` when a run asks.
    """

    def __init__(self, plan: ReplPlan, events: queue.Queue[tuple[str, Any]]) -> None:
        self.plan = plan
        self.events = events
        self.starting = True
        self.session: Session | None = None
        self._codemode: CodeMode | None = None
        self._scope: anyio.CancelScope | None = None
        self._closing: anyio.Event | None = None
        self._controller: AbortController | None = None
        self._display: Display | None = None
        self._ask_lock: anyio.Lock | None = None

    async def serve(self) -> None:
        """Start the MCP servers, the runtime and the session; hold them until ``close``."""
        self._closing = anyio.Event()
        with anyio.CancelScope() as self._scope:
            registry = make_registry(self.plan.bindings, self._ask)
            async with open_mcp(
                self.plan.servers,
                registry,
                self.plan.mcp_timeout_ms,
                self.plan.mcp_start_timeout_ms,
            ):
                # From here a stop waits: a template cancelled while it starts prints its
                # own traceback (BrokenPipeError).
                self.starting = False
                async with self.plan.runtime.runtime() as runtime:
                    plan = SessionPlan(
                        self.plan.session_file or Path("-"),
                        self.plan.state,
                        self.plan.max_state_bytes,
                        commit_on_failure=True,  # as Python's REPL keeps them
                    )
                    self.session = open_session(runtime, plan)
                    self._codemode = CodeMode(
                        registry, SessionRuntime(runtime, self.session), self.plan.config
                    )
                    self.events.put(("ready", len(registry.manifest())))
                    await self._closing.wait()

    def cancel_start(self) -> bool:
        """Stop a start that is still at the MCP servers; whether it was (else it finishes)."""
        if self.starting and self._scope is not None:
            self._scope.cancel()
            return True
        return False

    def close(self) -> None:
        """Let ``serve`` stop everything (the runtime, then the MCP servers)."""
        if self._closing is not None:
            self._closing.set()
        if self._scope is not None and self.starting:
            self._scope.cancel()

    async def run(self, source: str) -> RunResult:
        """One input: a run in a fresh child carrying the session's state, shown as it goes."""
        assert self._codemode is not None, "run() before the engine is ready"
        controller = self._controller = AbortController()
        display = self._display = Display(result_stream(), sys.stderr, status=True)
        try:
            return await run_with_display(self._codemode, source, controller, display, [])
        finally:
            display.close()
            self._controller = self._display = None

    def abort(self, reason: str, notice: str) -> None:
        """Abort the run in progress (if any), saying ``notice`` above its status line."""
        if self._display is not None:
            self._display.notice(notice)
        if self._controller is not None:
            self._controller.abort(reason)

    async def _ask(self, call: Any, decision: Any) -> bool | Deny:
        if self.plan.decide is not None:
            return self.plan.decide
        if not can_ask():
            return no_terminal_denial(decision)
        if self._ask_lock is None:
            self._ask_lock = anyio.Lock()
        prompt = getattr(decision, "prompt", "") or ""
        text = f"{prompt} — allow {call.name}?" if prompt else f"allow {call.name}?"
        async with self._ask_lock:  # one question at a time, even for parallel calls
            question = Question(text)
            display = self._display
            with display.paused() if display is not None else contextlib.nullcontext():
                self.events.put(("ask", question))
                await question.done.wait()
        return question.answer
