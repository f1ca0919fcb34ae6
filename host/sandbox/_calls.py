"""A run's binding calls on the host: checked, bounded, served in arrival order.

Call ids must increase (the child's bridge numbers them in the order it writes them): one
integer says which ids were seen, whatever a program forges. A call whose name is not a
binding is answered on the spot. The calls waiting or running hold at most ``max_bytes`` of
arguments (as raw JSON, decoded when a worker takes them) and ``max_calls`` in number; past
either, the run's bridge stops reading until calls finish (the child keeps reading replies
while it waits to write, so a well-behaved program never deadlocks; a hostile one only
stalls itself, until its wall budget).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import msgspec

from host.sandbox._callqueue import CallQueue, QueuedCall
from runtime import Binding
from runtime.lowlevel import Call, CallLedger, Reply, ReplyError, Settled, encode_frame

__all__ = ("CallServer", "QueuedCall", "replay_fields", "reply_frame")

_encoder = msgspec.json.Encoder()
#: The most of an unknown name said back: a reply is never larger than what it answers.
_NAME_SHOWN = 80


def _shown_name(name: str) -> str:
    """``name`` as a reply says it: quoted, and cut when long."""
    if len(name) <= _NAME_SHOWN:
        return repr(name)
    return f"{name[:_NAME_SHOWN]!r}... ({len(name)} characters)"


class CallServer:
    """Admits a run's Call frames and hands them to workers; says when to stop reading."""

    def __init__(
        self,
        bindings: Mapping[str, Binding],
        *,
        max_workers: int,
        max_bytes: int,
        max_calls: int,
        send_nowait: Callable[[bytes], bool],
    ) -> None:
        self._bindings = bindings
        self.max_workers = max_workers
        self.max_bytes = max_bytes
        self.max_calls = max_calls
        self._send_nowait = send_nowait
        self._queue = CallQueue()
        self.last_id = 0
        self.calls = 0  # calls accepted (answered or queued)
        self.dropped = 0
        self.workers = 0
        self.in_flight = 0  # calls queued or running
        self.in_flight_bytes = 0

    @property
    def full(self) -> bool:
        """True while the calls in flight hold as much as they may: stop reading."""
        return self.in_flight >= self.max_calls or self.in_flight_bytes >= self.max_bytes

    @property
    def wants_worker(self) -> bool:
        """True if a call waits and another worker may start for it."""
        return (
            bool(self._queue) and not self._queue.idle_workers and self.workers < self.max_workers
        )

    def admit(self, call: Call) -> None:
        """Take one Call frame: drop it, answer it, or queue it."""
        if call.id <= self.last_id:
            self.dropped += 1  # a duplicate or an id from the past: forged
            return
        self.last_id = call.id
        self.calls += 1
        binding = self._bindings.get(call.name)
        if binding is None:  # answered on the spot: a forged name costs no task, no memory
            shown = _shown_name(call.name)
            reply = ReplyError(
                id=call.id,
                tool=call.name[:_NAME_SHOWN],
                message=f"no binding named {shown}",
                code="UNKNOWN_TOOL",
            )
            self._send_nowait(encode_frame(reply))
            return
        self.in_flight += 1
        self.in_flight_bytes += len(call.args)
        self._queue.put(QueuedCall(call.id, call.name, binding, call.args))

    def done(self, call: QueuedCall) -> None:
        """A worker finished ``call`` (answered or not)."""
        self.in_flight -= 1
        self.in_flight_bytes -= len(call.args)

    async def next_call(self) -> QueuedCall | None:
        """The next call for a worker, waiting for one; None once closed and drained."""
        return await self._queue.get()

    def close(self) -> None:
        """No more calls: idle workers wake and get None."""
        self._queue.close()


def reply_frame(call: QueuedCall, settled: Settled) -> bytes:
    """The reply to ``call``: its value (raw JSON, as the ledger recorded it) or its failure."""
    failure = settled.failure
    if failure is not None:
        return encode_frame(
            ReplyError(
                id=call.id,
                tool=failure.tool,
                message=failure.message,
                code=failure.code,
                exception_type=failure.exception_type,
            )
        )
    return encode_frame(Reply(id=call.id, value=msgspec.Raw(settled.value or b"null")))


def replay_fields(ledger: CallLedger) -> dict[str, Any]:
    """What the child's ``Start`` carries for the ledger: the seed of ``random``, and the
    journal's settled calls to answer itself when the run is a resume."""
    if not ledger.replay:
        return {"random_seed": ledger.seeds.random}
    return {
        "random_seed": ledger.seeds.random,
        "replay": msgspec.Raw(_encoder.encode(ledger.replay)),
    }
