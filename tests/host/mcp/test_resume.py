"""Durable runs over MCP with the real ``mcp`` client: an approval the client does not give
within the wall budget pauses the run in its session, and ``resume_run`` continues it."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.session import ClientRequestContext
from mcp.client.stdio import stdio_client
from mcp.types import ElicitRequestParams, ElicitResult

from tests.durable import CHARGE_THEN_RECEIPT

from .servers.shop_bindings import executions
from .support import SERVERS, child_env

pytestmark = [
    pytest.mark.timeout(90),
    pytest.mark.parametrize("anyio_backend", ["asyncio"]),
    pytest.mark.anyio,
]

WALL_MS = 1500


class _Silent:
    """A person who does not answer in time (then says no, too late)."""

    def __init__(self) -> None:
        self.asked = 0

    async def __call__(
        self, context: ClientRequestContext, params: ElicitRequestParams
    ) -> ElicitResult:
        self.asked += 1
        await anyio.sleep(WALL_MS / 1000 + 1.0)
        return ElicitResult(action="decline")


def _client(ledger: Path, person: Any, mode: str) -> Client:
    env = child_env()
    env["SHOP_LEDGER"] = str(ledger)
    command = [
        sys.executable,
        "-m",
        "host.cli",
        "mcp",
        "-b",
        str(SERVERS / "shop_bindings.py"),
        "--wall-ms",
        str(WALL_MS),
    ]
    params = StdioServerParameters(command=command[0], args=command[1:], env=env)
    return Client(stdio_client(params), elicitation_callback=person, cache=None, mode=mode)


async def _paused(client: Client, code: str) -> dict[str, Any]:
    result = await client.call_tool("run_code", {"code": code})
    assert result.is_error is False, result.content
    facts = dict(result.structured_content or {})
    assert "paused" in facts, facts
    text = result.content[0].text  # type: ignore[union-attr]
    run_id = facts["paused"]["run_id"]
    assert f"paused (run {run_id})" in text and "resume_run" in text
    return facts


@pytest.mark.parametrize("mode", ["auto", "legacy"])  # input_required (2026-07-28), a request
@pytest.mark.parametrize("approve", [True, False])
async def test_an_unanswered_approval_pauses_and_resume_run_continues(
    tmp_path: Path, mode: str, approve: bool
) -> None:
    ledger = tmp_path / "ledger"
    person = _Silent()
    async with _client(ledger, person, mode) as client:
        facts = await _paused(client, CHARGE_THEN_RECEIPT)
        assert facts["logs"] == ["charging", "charged ch_1"]
        (held,) = facts["paused"]["pending"]
        assert held["tool"] == "send_receipt" and held["args"] == {"to": "a@example.com"}
        assert "within the run's wall budget" in held["reason"]
        assert executions(str(ledger)) == {"charge": 1, "send_receipt": 0}
        done = await client.call_tool(
            "resume_run", {"run_id": facts["paused"]["run_id"], "approve": approve}
        )
        assert done.is_error is False, done.content
        receipt = "sent to a@example.com" if approve else "refused (DENIED)"
        assert done.structured_content == {
            "logs": [f"receipt: {receipt}"],
            "result": {"charge": {"id": "ch_1", "amount": 5}, "receipt": receipt},
        }
        again = await client.call_tool(
            "resume_run", {"run_id": facts["paused"]["run_id"], "approve": True}
        )
        assert again.is_error is True and "no paused run" in again.content[0].text  # type: ignore[union-attr]
    assert executions(str(ledger)) == {"charge": 1, "send_receipt": 1 if approve else 0}
    assert person.asked == 1  # the resume did not ask again


async def test_a_paused_step_commits_nothing_to_the_clients_session(tmp_path: Path) -> None:
    ledger = tmp_path / "ledger"
    async with _client(ledger, _Silent(), "legacy") as client:
        await client.call_tool("run_code", {"code": "n = 1"})
        step = "n = n + 10\nawait tools.send_receipt(to='s')\nreturn n"
        facts = await _paused(client, step)
        still = await client.call_tool("run_code", {"code": "return n"})
        assert (still.structured_content or {})["result"] == 1
        done = await client.call_tool(
            "resume_run", {"run_id": facts["paused"]["run_id"], "approve": True}
        )
        assert (done.structured_content or {})["result"] == 11
        after = await client.call_tool("run_code", {"code": "return n"})
        assert (after.structured_content or {})["result"] == 11


async def test_resume_run_refuses_what_it_cannot_resume(tmp_path: Path) -> None:
    ledger = tmp_path / "ledger"
    async with _client(ledger, _Silent(), "legacy") as client:
        facts = await _paused(client, CHARGE_THEN_RECEIPT)
        bad = await client.call_tool("resume_run", {"run_id": "nope", "approve": True})
        assert bad.is_error is True
        missing = await client.call_tool("resume_run", {"run_id": facts["paused"]["run_id"]})
        assert missing.is_error is True and "approve" in missing.content[0].text  # type: ignore[union-attr]
    async with _client(ledger, _Silent(), "legacy") as other:  # a new server process
        gone = await other.call_tool(
            "resume_run", {"run_id": facts["paused"]["run_id"], "approve": True}
        )
        assert gone.is_error is True
    assert executions(str(ledger)) == {"charge": 1, "send_receipt": 0}
