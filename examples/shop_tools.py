"""Tools with a side effect and an approval, for the durable-run examples of the README.

``charge`` appends to ``/tmp/dsh-shop.charges`` (one line per charge really made), so a run
that is paused and resumed shows it charged once; ``send_receipt`` needs a person's yes.
"""

from __future__ import annotations

from typing import Any

from host.tools import Ask, ToolRegistry, ToolRunContext, tool

CHARGES = "/tmp/dsh-shop.charges"


@tool
def charge(amount: int, *, ctx: ToolRunContext | None = None) -> dict[str, Any]:
    """Charge an amount (ctx.call_id, the same across a resume, is the idempotency key)."""
    call_id = ctx.call_id if ctx is not None else None
    with open(CHARGES, "a", encoding="utf-8") as charges:
        charges.write(f"{call_id} {amount}\n")
    return {"id": f"ch-{call_id}", "amount": amount}


@tool
def send_receipt(to: str) -> str:
    """Send the receipt of a charge (a person approves each one)."""
    return f"receipt sent to {to}"


def setup_registry(registry: ToolRegistry) -> None:
    """Ask before each receipt."""
    registry.pre_execute(
        lambda call, decision: Ask("send the receipt?") if call.name == "send_receipt" else None
    )
