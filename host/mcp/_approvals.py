"""Approvals over MCP: a tool call's ``ask`` decision becomes an elicitation to the client.

While ``dsh-code mcp`` runs a program for a ``run_code`` request, an ``Ask`` from a
pre-execute hook for one of the program's calls is put to the client that sent the request,
as a form elicitation with one boolean ``approve``. Before protocol 2026-07-28 it is a
server-initiated ``elicitation/create`` request; from 2026-07-28 on, where servers may not
send requests, ``run_code`` answers ``input_required`` (the questions, and a
``requestState`` naming the suspended run) and the client's retry carries the answers.
The program waits meanwhile (its wall budget runs; waiting bills no compute) and gets
``ToolCallError(code="DENIED")`` on a no. A client without elicitation support, or no
answer within the handler's ``timeout``, is a denial whose message says why; a question
still open near the end of the run's wall budget holds the call: the run pauses in the
client's session, and the client continues it with ``resume_run``.
"""

from __future__ import annotations

import contextvars
import json
import secrets
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Any, Final

import anyio
import anyio.abc

from host.tools import Pause

from ._exceptions import ApprovalUnavailable

__all__ = ("Approvals", "elicitation_ask_handler", "requesting")

#: The first protocol version in which servers may not send requests (elicitation by retry).
_MODERN: Final = "2026-07-28"
_REQUEST: contextvars.ContextVar[Any] = contextvars.ContextVar("dsh_code_mcp_asker", default=None)
#: How long before the end of a run's wall budget an unanswered question holds its call (at
#: most a quarter of the budget): the pause needs a moment to end the run.
PAUSE_MARGIN_S: Final = 0.5

SCHEMA: Final = {
    "type": "object",
    "properties": {
        "approve": {
            "type": "boolean",
            "title": "Allow this call",
            "description": "true allows this one tool call; false denies it",
            "default": False,
        }
    },
    "required": ["approve"],
}


@contextmanager
def requesting(asker: Any) -> Iterator[None]:
    """Within the block, ``ask`` decisions go to ``asker`` (``await asker.ask(ctx_text)``)."""
    token = _REQUEST.set(asker)
    try:
        yield
    finally:
        _REQUEST.reset(token)


def _approved(answer: Any) -> bool:
    """Only an accepted form whose ``approve`` is true approves."""
    return getattr(answer, "action", None) == "accept" and (
        (getattr(answer, "content", None) or {}).get("approve") is True
    )


def _can_elicit(ctx: Any) -> bool:
    from mcp.types import ClientCapabilities, ElicitationCapability, FormElicitationCapability

    form = ClientCapabilities(elicitation=ElicitationCapability(form=FormElicitationCapability()))
    try:
        return bool(ctx.session.check_client_capability(form))
    except Exception:
        return False


class _Direct:
    """Asks by a server-initiated request (protocols before 2026-07-28)."""

    def __init__(self, ctx: Any, deadline: float | None = None) -> None:
        self.ctx = ctx
        self.can_elicit = _can_elicit(ctx)
        self.deadline = deadline
        """When an unanswered question holds its call (the run pauses), on anyio's clock."""

    async def ask(self, message: str) -> bool:
        answer = await self.ctx.session.elicit_form(
            message, SCHEMA, related_request_id=self.ctx.request_id
        )
        return _approved(answer)


class _Suspended:
    """A run that outlives its request: it asks by ``input_required``, answered by retries."""

    def __init__(self, token: str, can_elicit: bool, deadline: float | None = None) -> None:
        self.token = token
        self.can_elicit = can_elicit
        self.deadline = deadline
        self.questions: dict[str, str] = {}
        self.answers: dict[str, Any] = {}
        self.answered: dict[str, anyio.Event] = {}
        self.result: Any = None
        self.finished = anyio.Event()
        self.changed = anyio.Event()
        self.ids = 0
        self.scope = anyio.CancelScope()
        """The run's: a request cancelled while the run is its to answer cancels the run."""

    async def ask(self, message: str) -> bool:
        self.ids += 1
        key = f"approve-{self.ids}"
        self.questions[key] = message
        event = self.answered[key] = anyio.Event()
        self._touch()
        try:
            await event.wait()
            return _approved(self.answers.pop(key))
        finally:
            self.questions.pop(key, None)
            self.answered.pop(key, None)

    def deliver(self, responses: dict[str, Any]) -> None:
        for key, answer in responses.items():
            if key in self.answered and not self.answered[key].is_set():
                self.answers[key] = answer
                self.answered[key].set()

    def _touch(self) -> None:
        self.changed.set()
        self.changed = anyio.Event()

    async def outcome(self) -> Any:
        """The run's result, or ``input_required`` with the questions still open."""
        from mcp.types import (
            ElicitRequest,
            ElicitRequestFormParams,
            InputRequest,
            InputRequiredResult,
        )

        while True:
            if self.finished.is_set():
                return self.result
            open_questions = {
                key: text for key, text in self.questions.items() if not self.answered[key].is_set()
            }
            if open_questions:
                requests: dict[str, InputRequest] = {
                    key: ElicitRequest(
                        params=ElicitRequestFormParams(message=text, requested_schema=SCHEMA)
                    )
                    for key, text in open_questions.items()
                }
                return InputRequiredResult(input_requests=requests, request_state=self.token)
            changed = self.changed
            async with anyio.create_task_group() as group:

                async def on_finish() -> None:
                    await self.finished.wait()
                    group.cancel_scope.cancel()

                group.start_soon(on_finish)
                await changed.wait()
                group.cancel_scope.cancel()


class Approvals:
    """One server's approvals: the runs suspended on a person's answer, and their tasks.

    ``lifespan`` is the server's lifespan (it holds the runs' task group); ``handle`` runs
    one ``run_code`` request, or resumes the run its ``requestState`` names.
    """

    def __init__(self, *, keep_seconds: float = 600.0) -> None:
        self._suspended: dict[str, _Suspended] = {}
        self._group: anyio.abc.TaskGroup | None = None
        self.keep_seconds = keep_seconds
        """How long a suspended run's result waits for the client's retry."""

    @asynccontextmanager
    async def lifespan(self, _server: Any) -> AsyncIterator[dict[str, Any]]:
        async with anyio.create_task_group() as group:
            self._group = group
            try:
                yield {}
            finally:
                self._group = None
                group.cancel_scope.cancel()

    async def handle(
        self,
        ctx: Any,
        params: Any,
        run: Callable[[], Awaitable[Any]],
        *,
        unknown: Any,
        wall_s: float | None = None,
    ) -> Any:
        """``run()`` with asks going to the requesting client; a retry resumes its run.
        ``wall_s``: the run's wall budget; a question unanswered near its end holds its call,
        so the run pauses rather than failing ``budget``."""
        token = getattr(params, "request_state", None)
        if token is not None:
            suspended = self._suspended.get(token)
            if suspended is None:
                return unknown
            suspended.deliver(dict(getattr(params, "input_responses", None) or {}))
            return await self._outcome(suspended)
        deadline = None
        if wall_s is not None:
            deadline = anyio.current_time() + wall_s - min(PAUSE_MARGIN_S, wall_s / 4)
        if str(getattr(ctx, "protocol_version", "")) < _MODERN or self._group is None:
            with requesting(_Direct(ctx, deadline)):
                return await run()
        suspended = _Suspended(secrets.token_urlsafe(24), _can_elicit(ctx), deadline)
        self._suspended[suspended.token] = suspended

        async def in_background() -> None:
            try:
                with suspended.scope, requesting(suspended):
                    suspended.result = await run()
            finally:
                suspended.finished.set()
                suspended._touch()
            with anyio.move_on_after(self.keep_seconds):  # until the client comes back
                await anyio.sleep_forever()
            self._suspended.pop(suspended.token, None)

        self._group.start_soon(in_background)
        return await self._outcome(suspended)

    async def _outcome(self, suspended: _Suspended) -> Any:
        try:
            out = await suspended.outcome()
        except anyio.get_cancelled_exc_class():
            # notifications/cancelled (or the server stopping): the run is not left behind
            suspended.scope.cancel()
            self._suspended.pop(suspended.token, None)
            raise
        if suspended.finished.is_set():
            self._suspended.pop(suspended.token, None)
        return out


def _question(call: Any, decision: Any) -> str:
    prompt = getattr(decision, "prompt", "") or ""
    try:
        args = json.dumps(call.args, ensure_ascii=False, sort_keys=True)
    except (TypeError, ValueError):
        args = repr(call.args)
    if len(args) > 2000:
        args = args[:2000] + "…"
    asked = f"A program wants to call {call.name}({args})."
    return f"{prompt}\n{asked}" if prompt else asked


def elicitation_ask_handler(*, timeout: float = 300.0) -> Any:
    """An ``ask_handler`` for a registry served over MCP: it asks the requesting client.

    ``timeout`` is how long to wait for an answer (seconds); past it the call is denied.
    A question still open near the end of the run's wall budget holds the call instead: the
    run pauses in the client's session, and ``resume_run`` continues it.
    """
    if not timeout > 0:
        raise ValueError(f"timeout must be positive, got {timeout!r}")

    async def ask(call: Any, decision: Any) -> bool | Pause:
        asker = _REQUEST.get()
        if asker is None:
            raise ApprovalUnavailable(
                "approval needed, but the call is not part of an MCP request: no client to ask"
            )
        if not asker.can_elicit:
            raise ApprovalUnavailable(
                "approval needed, but the MCP client does not support elicitation (form mode), "
                "so nobody can be asked; serve with --yes to allow every such call"
            )
        wait, pauses = timeout, False
        deadline = getattr(asker, "deadline", None)
        if deadline is not None and deadline - anyio.current_time() < timeout:
            wait, pauses = max(deadline - anyio.current_time(), 0.0), True
        try:
            with anyio.fail_after(wait):
                return bool(await asker.ask(_question(call, decision)))
        except TimeoutError:
            if pauses:
                return Pause(
                    "no answer from the MCP client within the run's wall budget: the run is "
                    "paused until the client resumes it (resume_run)"
                )
            raise ApprovalUnavailable(
                f"approval needed, but no answer came in {timeout:g} s"
            ) from None
        except ApprovalUnavailable:
            raise
        except Exception as exc:
            raise ApprovalUnavailable(
                f"approval needed, but asking the MCP client failed: {exc}"
            ) from exc

    return ask
