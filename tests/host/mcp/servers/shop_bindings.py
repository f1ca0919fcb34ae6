"""Bindings of the durable-run tests across processes: ``charge`` and ``send_receipt``, each
execution a line in the file ``$SHOP_LEDGER``; ``send_receipt`` needs a person's yes."""

from __future__ import annotations

import os
from typing import Any

from host.tools import Ask, ToolRegistry, tool


def _executed(name: str) -> int:
    """Note one execution of ``name``; how many there have been, this one included."""
    path = os.environ["SHOP_LEDGER"]
    with open(path, "a", encoding="utf-8") as ledger:
        ledger.write(name + "\n")
    with open(path, encoding="utf-8") as ledger:
        return sum(1 for line in ledger if line.strip() == name)


@tool
def charge(amount: int) -> dict[str, Any]:
    """Charge an amount."""
    return {"id": f"ch_{_executed('charge')}", "amount": amount}


@tool
def send_receipt(to: str) -> str:
    """Send the receipt (a person approves it)."""
    _executed("send_receipt")
    return f"sent to {to}"


def setup_registry(registry: ToolRegistry) -> None:
    """Ask before every receipt."""
    registry.pre_execute(
        lambda call, decision: Ask("send the receipt?") if call.name == "send_receipt" else None
    )


def executions(path: str) -> dict[str, int]:
    """What the ledger file says ran, by tool."""
    counts = {"charge": 0, "send_receipt": 0}
    if os.path.exists(path):
        with open(path, encoding="utf-8") as ledger:
            for line in ledger:
                counts[line.strip()] += 1
    return counts
