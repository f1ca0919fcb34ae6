"""A run's ledger on the host: its binding calls recorded as they settle, held calls, and the
replay of a journal being resumed. Every backend serves its calls through one.

``serve`` is a binding call's whole path on the host: a call the journal recorded is
answered from it (when its turn comes: in the order the calls settled before), never
executed; a held call of the journal is executed or refused as its decision says; any other
runs the binding with ``current_call`` set, and its outcome is recorded. A binding that
raises ``HoldCall`` holds its call: new calls wait, the calls already executing settle (and
are recorded), then the run is stopped and ``finish`` reports it paused. The journal's bytes
count against ``max_journal_bytes``; past it the run fails (``output_limit``), the journal
keeping every call before.
"""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

import msgspec

from runtime._contract import (
    Binding,
    CallInfo,
    RunError,
    RunRequest,
    RunResult,
    current_call,
)
from runtime._errors import HoldCall, builtin_exception_name
from runtime._journal import (
    CallFailure,
    Decision,
    Journal,
    JournalCall,
    JournalError,
    PendingCall,
    Seeds,
    inputs_digest,
    same_json,
    shown,
)
from runtime._json import json_problem
from runtime._waits import new_event, wait_event

__all__ = ("CallLedger", "Settled")

_encoder = msgspec.json.Encoder()
_decoder = msgspec.json.Decoder()
#: How long a recorded answer waits for the calls that settled before it to be asked again;
#: past it, recorded answers are given as soon as asked (a replay that lost the order).
PATIENCE_S = 0.5
#: Each decision, as the ledger keeps it.
_DECISIONS: dict[Any, str] = {"allow": "allow", True: "allow", "deny": "deny", False: "deny"}


class Settled(NamedTuple):
    """A call's outcome for its reply: the value's raw JSON, or the failure."""

    value: bytes | None
    failure: CallFailure | None


def _failure_of(exc: Exception, name: str) -> CallFailure:
    """What a binding's exception becomes in the program (``ToolCallError``'s facts)."""
    code = getattr(exc, "code", None)
    tool = getattr(exc, "tool", None)
    return CallFailure(
        tool=tool if isinstance(tool, str) else name,
        message=str(getattr(exc, "message", "") or exc) or type(exc).__name__,
        code=code if isinstance(code, str) else "TOOL_ERROR",
        exception_type=builtin_exception_name(exc),
    )


def _call_text(name: str, args: bytes | msgspec.Raw) -> str:
    return f"{name}({shown(args)})"


class CallLedger:
    """The ledger of one run (see the module's docstring); ``stop`` ends the run."""

    def __init__(
        self,
        request: RunRequest,
        *,
        language: str = "python",
        hash_seed: int = 0,
        resume: Journal | None = None,
        decisions: Mapping[str, Decision] | None = None,
        state: bytes | None = None,
    ) -> None:
        self._request = request
        self._language = language
        self._state = state
        self._max = request.limits.max_journal_bytes
        #: Ends the run with this error (the backend's; set before the first call).
        self.stop: Callable[[RunError], None] = lambda error: None
        self._old: tuple[JournalCall, ...] = ()  # a resumed journal's calls
        self._new: list[tuple[int, str, bytes, bytes | None, CallFailure | None]] = []
        self._pending: dict[int, tuple[PendingCall, str | None]] = {}
        self._pending_seen: set[int] = set()
        self._pending_asked: dict[int, Any] = {}  # held seq -> event, set when it is asked
        self._recorded: dict[int, tuple[int, JournalCall]] = {}
        self._held: list[PendingCall] = []
        self._executing = 0
        self._pausing = False
        self._ended: Any = None  # an event of the caller's async library, made when needed
        # the replay's order: a recorded call is answered once those that settled before it were
        self._issued: set[int] = set()
        self._turns: dict[int, Any] = {}
        self._cursor = 0
        self._relaxed = False
        if resume is None:
            if decisions:
                raise JournalError("decisions are for a resumed run: give the journal (resume=)")
            self.run_id = request.run_id or secrets.token_hex(8)
            self.seeds = Seeds(hash=hash_seed, random=secrets.randbits(62) + 1)
            self.replay: tuple[JournalCall, ...] = ()
            self._bytes = 0
            self._skip = 0
        else:
            self._check_fit(resume, request, state)
            self.run_id = resume.run_id
            self.seeds = Seeds(hash=hash_seed, random=resume.seeds.random)
            self.replay = resume.calls
            self._old = resume.calls
            self._bytes = resume.size
            self._skip = resume.logs
            self._recorded = {call.seq: (i, call) for i, call in enumerate(resume.calls)}
            self._pending = self._decided(resume, decisions or {})
        self.on_log = self._log_filter(request.on_log)

    # ---- a resume: does the journal fit this run? ----------------------------------------

    def _check_fit(self, journal: Journal, request: RunRequest, state: bytes | None) -> None:
        if not isinstance(journal, Journal):
            raise JournalError(f"resume= takes a Journal, got {type(journal).__name__}")
        journal.check()
        if journal.language != self._language:
            raise JournalError(
                f"the journal is of a {journal.language} run; this runtime runs {self._language}"
            )
        if journal.program != request.program:
            raise JournalError(
                "the journal is of another program: a resume runs the program the journal "
                "recorded (Journal.program)"
            )
        if journal.inputs_sha256 != inputs_digest(request.inputs):
            raise JournalError("the journal's run had other inputs than this request's")
        if request.run_id is not None and request.run_id != journal.run_id:
            raise JournalError(
                f"the request's run_id {request.run_id!r} is not the journal's ({journal.run_id!r})"
            )
        if journal.state_sha256 is not None:
            if state is None:
                raise JournalError("the journal is of a session run: resume it in its session")
            if hashlib.sha256(state).hexdigest() != journal.state_sha256:
                raise JournalError(
                    "the session's state is not the one the journal's run started from (a "
                    "later run of the session committed another)"
                )
        if journal.size > self._max:
            raise JournalError(
                f"the journal holds {journal.size} bytes of calls, more than this run's "
                f"max_journal_bytes ({self._max})"
            )

    @staticmethod
    def _decided(
        journal: Journal, decisions: Mapping[str, Decision]
    ) -> dict[int, tuple[PendingCall, str | None]]:
        held = {call.call_id: call for call in journal.pending}
        for call_id, decision in decisions.items():
            if call_id not in held:
                raise JournalError(
                    f"no pending call {call_id!r} in the journal (it holds: "
                    f"{', '.join(held) or 'none'})"
                )
            if type(decision) not in (str, bool) or decision not in _DECISIONS:
                raise JournalError(f"a decision is 'allow' or 'deny', not {decision!r}")
        return {
            call.seq: (
                call,
                _DECISIONS[decisions[call.call_id]] if call.call_id in decisions else None,
            )
            for call in journal.pending
        }

    def _log_filter(self, on_log: Callable[[str], None] | None) -> Callable[[str], None] | None:
        """``on_log`` without the lines the replay writes again (the journal's ``logs``)."""
        if on_log is None or self._skip == 0:
            return on_log
        left = [self._skip]

        def new_lines_only(line: str) -> None:
            if left[0] > 0:
                left[0] -= 1
            else:
                on_log(line)

        return new_lines_only

    # ---- serving a call --------------------------------------------------------------------

    async def serve(
        self, seq: int, name: str, args: bytes, binding: Binding, *, max_value: int | None = None
    ) -> Settled | None:
        """Answer call ``seq``: its outcome, or None when it gets no answer (it is held, or
        the run is stopped). ``max_value``: the largest value's JSON a reply can carry."""
        recorded = self._recorded.get(seq)
        if recorded is not None:
            return await self._replayed(seq, name, args, *recorded)
        approved = False
        if self._pending:
            decided = self._pending.get(seq)
            if decided is None:
                if await self._skipped_pending(seq, name, args):
                    return None
            else:
                held, decision = decided
                self._pending_seen.add(seq)
                asked = self._pending_asked.pop(seq, None)
                if asked is not None:
                    asked.set()
                if held.name != name or not same_json(_encoder.encode(held.args), args):
                    self._diverge(
                        seq, _call_text(held.name, _encoder.encode(held.args)), name, args
                    )
                    return None
                if decision == "deny":
                    failure = CallFailure(
                        tool=name.rsplit(".", 1)[-1],
                        message=f"the call was refused when the run resumed ({held.reason})",
                        code="DENIED",
                    )
                    return self._record(seq, name, args, None, failure)
                approved = decision == "allow"
        if self._pausing:
            await self.wait_end()  # held: the run ends before it could run
            return None
        if self._bytes + len(name) + len(args) > self._max:
            self._over(seq, name, len(name) + len(args))
            return None
        try:
            decoded = _decoder.decode(args)
        except (msgspec.DecodeError, RecursionError, MemoryError):
            self._fail(
                "invalid_completion",
                f"the arguments of binding {name} cannot be read as JSON (nested too deep, or "
                "an integer of more than 4300 digits)",
            )
            return None
        self._executing += 1
        token = current_call.set(CallInfo(self.run_id, seq, approved))
        try:
            value = await binding(decoded)
        except HoldCall as held:
            self._hold(seq, name, decoded, held.reason)
            return None
        except Exception as exc:
            return self._record(seq, name, args, None, _failure_of(exc, name))
        else:
            return self._settle_value(seq, name, args, value, max_value)
        finally:
            current_call.reset(token)
            self._executing -= 1
            if self._pausing and self._executing == 0:
                self._pause_now()

    def _settle_value(
        self, seq: int, name: str, args: bytes, value: Any, max_value: int | None
    ) -> Settled | None:
        problem = json_problem(value)
        if problem is not None:
            self._fail(
                "invalid_completion",
                f"binding {name} returned a value that is not lossless JSON: {problem}",
            )
            return None
        raw = _encoder.encode(value)
        if max_value is not None and len(raw) > max_value:
            failure = CallFailure(
                tool=name,
                message=f"the result of {name} is {len(raw)} bytes of JSON, more than the "
                f"bridge carries ({max_value})",
                code="TOOL_ERROR",
            )
            return self._record(seq, name, args, None, failure)
        return self._record(seq, name, args, raw, None)

    def _record(
        self, seq: int, name: str, args: bytes, value: bytes | None, failure: CallFailure | None
    ) -> Settled | None:
        # kept as a tuple: the journal's structs are made once, by ``finish`` (a call's cost)
        if failure is None:
            assert value is not None
            size = len(name) + len(args) + len(value)
        else:
            size = len(name) + len(args) + len(failure.tool) + len(failure.message)
            size += len(failure.code)
        if self._bytes + size > self._max:
            self._over(seq, name, size)
            return None
        self._bytes += size
        self._new.append((seq, name, args, value, failure))
        return Settled(value, failure)

    def _journal_calls(self) -> tuple[JournalCall, ...]:
        """The journal's calls: the resumed journal's, then this run's, as they settled."""
        made = tuple(
            JournalCall(seq=seq, name=name, args=msgspec.Raw(args), value=msgspec.Raw(value))
            if failure is None and value is not None
            else JournalCall(seq=seq, name=name, args=msgspec.Raw(args), error=failure)
            for seq, name, args, value, failure in self._new
        )
        return self._old + made

    # ---- replay ----------------------------------------------------------------------------

    async def _replayed(
        self, seq: int, name: str, args: bytes, index: int, call: JournalCall
    ) -> Settled | None:
        if call.name != name or not same_json(call.args, args):
            self._diverge(seq, _call_text(call.name, call.args), name, args)
            return None
        await self._turn(index)
        if call.error is not None:
            return Settled(None, call.error)
        assert isinstance(call.value, msgspec.Raw)
        return Settled(bytes(call.value), None)

    async def _turn(self, index: int) -> None:
        """Until every recorded call that settled before this one has been answered (or the
        patience ran out: then every recorded call is answered as soon as asked)."""
        self._issued.add(index)
        self._advance()
        if self._relaxed or index < self._cursor:
            return
        event = self._turns[index] = new_event()
        if not await wait_event(event, PATIENCE_S):
            self._relaxed = True
            for waiting in self._turns.values():
                waiting.set()
            self._turns.clear()

    def _advance(self) -> None:
        while self._cursor in self._issued:
            event = self._turns.pop(self._cursor, None)
            if event is not None:
                event.set()
            self._cursor += 1

    async def _skipped_pending(self, seq: int, name: str, args: bytes) -> bool:
        """A call after a held call of the journal that the program never asked: diverged.

        The program numbers its calls as it issues them, but on some backends they reach the
        ledger in another order (threads, tasks of the caller's loop): a held call issued
        before this one has the patience to arrive, and nothing after it runs before it has.
        """
        for held, _ in list(self._pending.values()):  # the wait below may let others in
            if held.seq < seq and held.seq not in self._pending_seen:
                asked = self._pending_asked.get(held.seq)
                if asked is None:
                    asked = self._pending_asked[held.seq] = new_event()
                if await wait_event(asked, PATIENCE_S):
                    continue
                self._diverge(
                    held.seq, _call_text(held.name, _encoder.encode(held.args)), name, args, at=seq
                )
                return True
        return False

    def _diverge(
        self, step: int, journal_has: str, name: str, args: bytes, *, at: int | None = None
    ) -> None:
        asked = _call_text(name, args)
        where = "" if at is None else f" (at its step {at})"
        self._fail(
            "replay_diverged",
            f"the replay diverged at step {step}: the journal has {journal_has}, the program "
            f"asked {asked}{where}",
        )

    # ---- holding, failing, the end -----------------------------------------------------------

    def _hold(self, seq: int, name: str, args: Any, reason: str) -> None:
        self._held.append(
            PendingCall(
                seq=seq, call_id=f"{self.run_id}:{seq}", name=name, args=args, reason=str(reason)
            )
        )
        self._pausing = True  # the stop comes when the calls executing now have settled

    def _pause_now(self) -> None:
        self._fail("aborted", "the run paused: a binding call was held")

    def _over(self, seq: int, name: str, size: int) -> None:
        self._fail(
            "output_limit",
            f"the journal passed max_journal_bytes ({self._max}): call {seq} ({name}) would add "
            f"{size} bytes to its {self._bytes}; the journal keeps the {len(self._old) + len(self._new)} calls "
            "before it",
        )

    def _fail(self, kind: Any, message: str) -> None:
        self.stop(RunError(kind=kind, message=message))
        if self._ended is not None:
            self._ended.set()

    async def wait_end(self) -> None:
        """Until the run has ended (its ledger stopped it, or it finished)."""
        if self._ended is None:
            self._ended = new_event()
        await wait_event(self._ended)

    def finish(self, result: RunResult) -> RunResult:
        """The run's result with its journal, paused if it held calls and did not complete;
        without the log lines the replay wrote again."""
        if self._ended is not None:
            self._ended.set()
        error = result.error
        logs = result.logs[self._skip :] if self._skip else result.logs
        pending: tuple[PendingCall, ...] = ()
        if self._held and error is not None and error.kind == "aborted":
            error, pending = None, tuple(self._held)
        elif error is None and not self._held and len(self._pending_seen) < len(self._pending):
            unseen = [
                held for held, _ in self._pending.values() if held.seq not in self._pending_seen
            ]
            first = min(unseen, key=lambda held: held.seq)
            error = RunError(
                kind="replay_diverged",
                message=f"the replay diverged at step {first.seq}: the journal has "
                f"{_call_text(first.name, _encoder.encode(first.args))} pending, and the program "
                "ended without asking it",
            )
        journal = Journal(
            language=self._language,
            run_id=self.run_id,
            program=self._request.program,
            inputs_sha256=inputs_digest(self._request.inputs),
            state_sha256=self._state_digest(completed=error is None and not pending),
            seeds=self.seeds,
            logs=self._skip + len(logs),
            calls=self._journal_calls(),
            pending=tuple(self._held),
        )
        value = result.value if error is None and not pending else msgspec.UNSET
        return msgspec.structs.replace(
            result, logs=logs, error=error, value=value, pending=pending, journal=journal
        )

    def _state_digest(self, *, completed: bool) -> str | None:
        # Only a run that did not complete is resumed in the state it started from; hashing a
        # state (~1.3 ms a MiB) is not worth it on every session step.
        if self._state is None or completed:
            return None
        return hashlib.sha256(self._state).hexdigest()
