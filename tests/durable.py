"""What the durable-run tests of every layer share: a shop whose tools count their executions,
and the programs of the issue's acceptance cases."""

from __future__ import annotations

from typing import Any

import anyio
import msgspec

from runtime import Binding, HoldCall, RunResult, current_call

#: Charges, then asks for the receipt (held until approved), then returns both.
CHARGE_THEN_RECEIPT = """\
print("charging")
charge = await tools.charge(amount=5)
print("charged", charge["id"])
try:
    receipt = await tools.send_receipt(to="a@example.com")
except ToolCallError as exc:
    receipt = f"refused ({exc.code})"
print("receipt:", receipt)
return {"charge": charge, "receipt": receipt}
"""

#: Three calls at once, the middle one held.
GATHER_THREE = """\
import asyncio
got = await asyncio.gather(tools.charge(amount=1), tools.send_receipt(to="b"), tools.charge(amount=2))
return got
"""

#: Two tasks whose second calls are issued in the order their first calls settle (a slow
#: tool in one, a fast one in the other): a replay must answer in that order too.
SETTLE_ORDER = """\
import asyncio

async def one(amount, delay):
    first = await tools.charge(amount=amount, delay=delay)
    return await tools.charge(amount=first["amount"] * 10)

both = await asyncio.gather(one(1, 0.2), one(2, 0.0))
receipt = await tools.send_receipt(to="c")
return [both, receipt]
"""


#: Draws from ``random`` and a set's order before it calls: a replay must see the same.
SEEDED = """\
import random
seen = [random.random(), list({"alpha", "beta", "gamma", "delta", "epsilon"}), hash("abc")]
await tools.charge(amount=1, seen=seen)
await tools.send_receipt(to="d")
return seen + [random.random()]
"""


class Shop:
    """Tools that count how often each really ran; ``send_receipt`` holds until approved."""

    def __init__(self) -> None:
        self.executed: dict[str, int] = {"charge": 0, "send_receipt": 0}
        self.call_ids: list[str] = []
        self.approved: list[bool] = []

    async def charge(self, args: dict[str, Any]) -> dict[str, Any]:
        info = current_call.get()
        assert info is not None
        self.call_ids.append(info.call_id)
        delay = args.get("delay", 0.0)
        if delay:
            await anyio.sleep(delay)
        self.executed["charge"] += 1
        return {"id": f"ch_{self.executed['charge']}", "amount": args["amount"]}

    async def send_receipt(self, args: dict[str, Any]) -> str:
        info = current_call.get()
        assert info is not None
        self.approved.append(info.approved)
        if not info.approved:
            raise HoldCall(f"a person must approve the receipt to {args['to']}")
        self.call_ids.append(info.call_id)
        self.executed["send_receipt"] += 1
        return f"sent to {args['to']}"

    @property
    def bindings(self) -> dict[str, Binding]:
        return {"tools.charge": self.charge, "tools.send_receipt": self.send_receipt}


def assert_the_gather_resumed_once_each(paused: RunResult, done: RunResult) -> None:
    """GATHER_THREE resumed: each charge ran once, and a replayed one answers as it first did.

    Which charge ran first is not promised (calls issued together run concurrently), so the
    ids are checked against the journal, not against the order of issue.
    """
    assert paused.journal is not None and done.ok, done.error
    first, receipt, second = done.value
    assert (first["amount"], receipt, second["amount"]) == (1, "sent to b", 2)
    assert sorted([first["id"], second["id"]]) == ["ch_1", "ch_2"]
    for call in paused.journal.calls:  # seq 1 and 3 are the gather's places 0 and 2
        assert done.value[call.seq - 1] == msgspec.json.decode(call.value)  # type: ignore[arg-type]
