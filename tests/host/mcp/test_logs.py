"""The MCP log forwarder: batches while a send is in flight, bounded, O(bytes) for a flood."""

from __future__ import annotations

import anyio
import pytest

from host.mcp._logs import LogForwarder

pytestmark = pytest.mark.anyio


class _Client:
    """Records notifications; each send waits for ``gate`` (a slow client) when given."""

    def __init__(self, gate: anyio.Event | None = None, fail: bool = False) -> None:
        self.sent: list[str] = []
        self.gate = gate
        self.fail = fail
        self.entered = anyio.Event()

    async def __call__(self, text: str) -> None:
        self.entered.set()
        if self.gate is not None:
            await self.gate.wait()
        if self.fail:
            raise ConnectionError("the client went away")
        self.sent.append(text)


async def test_lines_arriving_during_a_send_are_joined_into_the_next() -> None:
    gate = anyio.Event()
    client = _Client(gate)
    forwarder = LogForwarder(client)
    async with anyio.create_task_group() as group:
        group.start_soon(forwarder.run)
        forwarder.push("first")
        await client.entered.wait()  # "first" is being sent
        for i in range(1000):
            forwarder.push(f"line {i}")
        forwarder.close()
        gate.set()
    assert client.sent[0] == "first"
    assert "\n".join(client.sent[1:]).split("\n") == [f"line {i}" for i in range(1000)]
    assert len(client.sent) == 2  # one notification for the thousand lines


async def test_a_flood_costs_notifications_per_batch_not_per_line() -> None:
    client = _Client()
    forwarder = LogForwarder(client, max_batch_chars=64 * 1024)
    async with anyio.create_task_group() as group:
        group.start_soon(forwarder.run)
        for i in range(100_000):
            forwarder.push(f"{i:07d}")  # 100k short lines pushed before the sender runs
        forwarder.close()
    lines = "\n".join(client.sent).split("\n")
    assert len(client.sent) <= 100_000 * 8 // (64 * 1024) + 2
    assert lines[:3] == ["0000000", "0000001", "0000002"]
    assert len(lines) + forwarder.dropped_total >= 100_000


async def test_past_the_bound_lines_are_dropped_counted_and_said() -> None:
    gate = anyio.Event()
    client = _Client(gate)
    forwarder = LogForwarder(client, max_pending_chars=1000, max_batch_chars=100)
    async with anyio.create_task_group() as group:
        group.start_soon(forwarder.run)
        forwarder.push("x")
        await client.entered.wait()
        for _ in range(1000):
            forwarder.push("y" * 9)  # 10 characters each: 100 fit
        forwarder.close()
        gate.set()
    assert forwarder.dropped_total == 900
    text = "\n".join(client.sent)
    assert text.count("yyyyyyyyy") == 100
    assert "900 log lines not forwarded" in client.sent[-1]


async def test_a_long_line_is_cut_and_a_failing_client_stops_the_forwarding() -> None:
    client = _Client()
    forwarder = LogForwarder(client, max_batch_chars=10)
    async with anyio.create_task_group() as group:
        group.start_soon(forwarder.run)
        forwarder.push("z" * 25)
        forwarder.close()
    assert client.sent == ["zzzzzzzzzz… (15 more characters)"]

    failing = _Client(fail=True)
    forwarder = LogForwarder(failing)
    with anyio.fail_after(5):
        async with anyio.create_task_group() as group:
            group.start_soon(forwarder.run)
            forwarder.push("a")
            await failing.entered.wait()
            forwarder.push("b")  # after the failure: ignored, and run() returns
    assert failing.sent == []
