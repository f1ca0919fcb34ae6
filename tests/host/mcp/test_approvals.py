"""Approvals over MCP: ``dsh-code mcp`` puts an ``ask`` to the real ``mcp`` client by elicitation."""

from __future__ import annotations

import sys
import time
from typing import Any

import pytest
from mcp import Client, StdioServerParameters
from mcp.client.session import ClientRequestContext
from mcp.client.stdio import stdio_client
from mcp.types import ElicitRequestFormParams, ElicitRequestParams, ElicitResult

from host.mcp import ApprovalUnavailable, elicitation_ask_handler

from .support import SERVERS, child_env

pytestmark = [
    pytest.mark.timeout(60),
    pytest.mark.parametrize("anyio_backend", ["asyncio"]),
    pytest.mark.anyio,
]

PROGRAM = """
n = await tools.multiply(a=6, b=7)
try:
    done = await tools.remove(path=f"/tmp/{n}")
except ToolCallError as exc:
    return {"code": exc.code, "message": exc.message}
return {"done": done}
"""


def _params(*extra: str) -> StdioServerParameters:
    command = [sys.executable, "-m", "host.cli", "mcp", "-b", str(SERVERS / "ask_bindings.py")]
    return StdioServerParameters(command=command[0], args=[*command[1:], *extra], env=child_env())


class _Person:
    """Answers elicitations as told, after a pause, and remembers what it was asked."""

    def __init__(self, action: str, approve: bool = True, pause: float = 0.0) -> None:
        self.action, self.approve, self.pause = action, approve, pause
        self.asked: list[ElicitRequestParams] = []

    async def __call__(
        self, context: ClientRequestContext, params: ElicitRequestParams
    ) -> ElicitResult:
        import anyio

        self.asked.append(params)
        await anyio.sleep(self.pause)
        content = {"approve": self.approve} if self.action == "accept" else None
        return ElicitResult(action=self.action, content=content)  # type: ignore[arg-type]


async def _run(person: _Person | None, *extra: str, mode: str = "auto") -> Any:
    client = Client(
        stdio_client(_params(*extra)),
        elicitation_callback=person,
        cache=None,
        mode=mode,
    )
    async with client:
        result = await client.call_tool("run_code", {"code": PROGRAM})
    assert result.is_error is False
    return (result.structured_content or {})["result"]


@pytest.mark.parametrize("mode", ["auto", "legacy"])  # input_required (2026-07-28), a request
async def test_a_yes_lets_the_call_run_and_the_program_waits_for_it(mode: str) -> None:
    person = _Person("accept", approve=True, pause=0.5)
    started = time.monotonic()
    assert await _run(person, mode=mode) == {"done": "removed /tmp/42"}
    assert time.monotonic() - started >= 0.5  # the program waited for the answer
    (asked,) = person.asked
    assert "removing /tmp/42" in asked.message and 'remove({"path": "/tmp/42"})' in asked.message
    assert isinstance(asked, ElicitRequestFormParams)
    assert asked.requested_schema["properties"]["approve"]["type"] == "boolean"


@pytest.mark.parametrize("mode", ["auto", "legacy"])
@pytest.mark.parametrize(
    ("action", "approve"), [("accept", False), ("decline", True), ("cancel", True)]
)
async def test_anything_but_an_accepted_yes_is_denied(
    action: str, approve: bool, mode: str
) -> None:
    out = await _run(_Person(action, approve=approve), mode=mode)
    assert out["code"] == "DENIED"
    assert "not approved: removing /tmp/42" in out["message"]


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_a_client_without_elicitation_gets_a_denial_saying_why(mode: str) -> None:
    out = await _run(None, mode=mode)
    assert out["code"] == "DENIED"
    assert "does not support elicitation" in out["message"] and "--yes" in out["message"]


async def test_yes_allows_without_asking() -> None:
    person = _Person("decline")
    assert await _run(person, "--yes") == {"done": "removed /tmp/42"}
    assert person.asked == []


async def test_outside_a_request_nobody_can_be_asked() -> None:
    ask = elicitation_ask_handler(timeout=1)

    class Call:
        name, args = "remove", {"path": "/x"}

    with pytest.raises(ApprovalUnavailable, match="not part of an MCP request"):
        await ask(Call(), None)
    with pytest.raises(ValueError, match="timeout"):
        elicitation_ask_handler(timeout=0)
