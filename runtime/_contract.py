"""The code-runtime contract: requests, limits, results, failure kinds, and the protocol."""

from __future__ import annotations

import contextvars
import typing
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Literal, Protocol, runtime_checkable

import msgspec

from runtime._journal import Decision, Journal, PendingCall

__all__ = (
    "FAILURE_KINDS",
    "AbortSignalLike",
    "Binding",
    "CallInfo",
    "CallStyle",
    "CodeRuntime",
    "FailureKind",
    "Limits",
    "RunError",
    "RunRequest",
    "RunResult",
    "RunStats",
    "current_call",
)

FailureKind = Literal[
    "parse",
    "exception",
    "invalid_completion",
    "output_limit",
    "budget",
    "memory",
    "aborted",
    "died",
    "state",
    "replay_diverged",
]
FAILURE_KINDS: tuple[str, ...] = typing.get_args(FailureKind)

#: A binding: an async host callable taking the JSON arguments and returning a JSON value.
Binding = Callable[[Any], Awaitable[Any]]


class Limits(msgspec.Struct, frozen=True, kw_only=True):
    """Per-run limits; every one has the seed's default."""

    compute_ms: int = 60_000
    """Busy CPU time of the child and every process it started (waiting is free)."""
    max_wall_ms: int = 600_000
    """Wall-clock time from start to settle, never paused."""
    max_output_bytes: int = 64 * 1024 * 1024
    """Bytes of log text plus the result's JSON encoding."""
    max_heap_mb: int = 512
    """Heap the program may grow by (private writable memory, RLIMIT_DATA)."""
    max_parallel_sub_calls: int = 10
    """Binding calls executing at once; 1 makes them serial."""
    max_journal_bytes: int = 64 * 1024 * 1024
    """Bytes of the run's journal: its calls' names, arguments and outcomes."""

    def __post_init__(self) -> None:
        for field in self.__struct_fields__:
            value = getattr(self, field)
            if type(value) is not int or value <= 0:
                raise ValueError(f"Limits.{field} must be a positive int, got {value!r}")
            if value > _LIMIT_MAX[field]:
                raise ValueError(
                    f"Limits.{field} must be at most {_LIMIT_MAX[field]} (what the platform can "
                    f"represent), got {value}"
                )


#: The largest value of each limit: what rlimits, timers and sizes can represent here.
_LIMIT_MAX: dict[str, int] = {
    "compute_ms": 2**40,  # ~35 years
    "max_wall_ms": 2**40,
    "max_output_bytes": 2**62,
    "max_heap_mb": 2**42,  # 2**62 bytes: RLIMIT_DATA is a 64-bit byte count
    "max_parallel_sub_calls": 2**20,
    "max_journal_bytes": 2**62,
}

CallStyle = Literal["async", "sync"]


@runtime_checkable
class AbortSignalLike(Protocol):
    """What ``RunRequest.abort`` accepts: anyio/asyncio/trio events and ``host.tools.AbortSignal``."""

    def is_set(self) -> bool: ...

    async def wait(self) -> Any: ...


class RunRequest(msgspec.Struct, frozen=True, kw_only=True):
    """One program to run, with its bindings, inputs, limits and observers."""

    program: str
    bindings: Mapping[str, Binding] = msgspec.field(default_factory=dict)
    """Name -> async callable; ``tools.add`` becomes attribute ``add`` of global ``tools``."""
    inputs: Mapping[str, Any] = msgspec.field(default_factory=dict)
    """JSON values made globals of the program."""
    limits: Limits = msgspec.field(default_factory=Limits)
    policy: Literal["python", "restricted"] = "python"
    call_style: CallStyle = "async"
    """How the program calls bindings: ``await tools.x(...)`` ("async") or ``tools.x(...)``,
    blocking the calling thread until the reply ("sync"); either from any thread or loop."""
    on_log: Callable[[str], None] | None = None
    """Called with each log line as the child writes it (without the newline)."""
    abort: AbortSignalLike | None = None
    """When set, the run settles with kind ``aborted``."""
    on_progress: Callable[[RunStats], None] | None = None
    """Called now and then (at most every 100 ms) with the run's figures so far."""
    run_id: str | None = None
    """The run's id (bindings see it in ``current_call``); None: the runtime makes one."""


class CallInfo(msgspec.Struct, frozen=True):
    """The binding call a binding is answering: its run and its place in the program's order."""

    run_id: str
    seq: int
    """1 for the program's first call, 2 for its second, ... in the order it issued them."""
    approved: bool = False
    """True for a held call that the resume of its run allowed: execute it without asking."""

    @property
    def call_id(self) -> str:
        """``<run id>:<seq>``: stable for the call, across a resumed run too."""
        return f"{self.run_id}:{self.seq}"


#: While a binding runs: the call it answers (set by the runtime around each binding call).
current_call: contextvars.ContextVar[CallInfo | None] = contextvars.ContextVar(
    "dsh_code_current_call", default=None
)


class RunError(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """Why a run failed: ``kind`` (see ``FAILURE_KINDS``), a model-readable message, and facts."""

    kind: FailureKind
    message: str
    budget: Literal["compute", "wall"] | None = None
    """Which budget ran out (kind ``budget``)."""
    exit_status: int | None = None
    """The child's exit code, or minus the signal number that killed it (kind ``died``)."""
    exception_type: str | None = None
    """The exception's class name (kind ``exception``)."""
    traceback: str | None = None
    """The traceback in program line numbers, without frames of ours (kind ``exception``)."""
    lineno: int | None = None
    """The program line the failure points at, when known."""


class RunStats(msgspec.Struct, frozen=True, kw_only=True):
    """Facts about how a run went, successful or not."""

    isolation: str
    compute_ms: float
    wall_ms: float
    calls: int
    dropped_frames: int
    state_bytes: int = 0
    """The size of the session state the run left (0: not a session run, or it failed)."""
    node: str | None = None
    """The node id or host name a run ran on; None for a local runtime."""


class RunResult(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """What a run resolves with: ``value`` (absent unless set), ``logs`` in order, ``error`` if failed."""

    logs: list[str]
    value: Any = msgspec.UNSET
    error: RunError | None = None
    stats: RunStats | None = None
    state_dropped: dict[str, str] = msgspec.field(default_factory=dict)
    """A session run's names that could not be carried to the next run, with why."""
    value_is_repr: bool = False
    """``value`` is the ``repr()`` string of a trailing bare expression whose value is not JSON
    (a set, a tuple, a date, a DataFrame's shape), as Python's REPL would show it."""
    journal: Journal | None = None
    """The run's settled binding calls (and held ones): what ``run(..., resume=)`` replays."""
    pending: tuple[PendingCall, ...] = ()
    """The calls held when the run paused (empty: it did not pause)."""

    @property
    def ok(self) -> bool:
        """True when the program completed."""
        return self.error is None and not self.pending

    @property
    def paused(self) -> bool:
        """True when the run paused on held calls (``pending``): not failed, resumable."""
        return self.error is None and bool(self.pending)

    @property
    def has_value(self) -> bool:
        """True when the program produced a result (``None`` counts: it is JSON null)."""
        return self.value is not msgspec.UNSET

    def to_json(self) -> dict[str, Any]:
        """The JSON shape ``{"value"?, "value_is_repr"?, "logs", "error"?, "state_dropped"?,
        "pending"?}`` (stats and journal left out; ``value_is_repr`` only when true, ``pending``
        only when the run paused)."""
        out: dict[str, Any] = {}
        if self.has_value:
            out["value"] = self.value
        if self.value_is_repr:
            out["value_is_repr"] = True
        out["logs"] = list(self.logs)
        if self.error is not None:
            out["error"] = msgspec.to_builtins(self.error)
        if self.state_dropped:
            out["state_dropped"] = dict(self.state_dropped)
        if self.pending:
            out["pending"] = msgspec.to_builtins(self.pending)
        return out


@runtime_checkable
class CodeRuntime(Protocol):
    """Runs programs; ``run`` resolves with a ``RunResult`` whatever the program did."""

    @property
    def language(self) -> str:
        """The source language ``run`` expects ("python")."""
        ...

    @property
    def isolation(self) -> str:
        """A label for the execution substrate ("process", "namespaces")."""
        ...

    async def run(
        self,
        request: RunRequest,
        *,
        resume: Journal | None = None,
        decisions: Mapping[str, Decision] | None = None,
    ) -> RunResult:
        """Run one program; raises only when the caller breaks the contract. ``resume``: the
        journal of an earlier run of it to replay first (its recorded calls answered from it,
        never executed again), ``decisions``: call id -> "allow" or "deny" for its held calls.
        """
        ...

    async def aclose(self) -> None:
        """Abort in-flight runs, wait until every child has exited; later runs raise."""
        ...

    async def __aenter__(self) -> CodeRuntime: ...

    async def __aexit__(self, *exc_info: object) -> None: ...
