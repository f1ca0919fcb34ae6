"""A session: a chain of runs, each in a fresh child, carrying the program's globals forward.

The state is an opaque blob: the child makes it at the end of a successful run (cloudpickle
of its module globals) and the next run's child loads it before its program starts. This
process stores it and never loads it, so a tampered blob can do no more than a program can.
A run that fails leaves the state as it was, unless the session keeps a failed run's names
(``commit_on_failure``): then a run that raised commits the globals it had at its exception.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

import anyio

from runtime import CodeRuntime, Decision, Journal, RunRequest, RunResult

__all__ = ("Session", "SessionRuntime")

#: The default cap on a session's state.
MAX_STATE_BYTES = 64 * 1024 * 1024


class SessionRunner(Protocol):
    """What a session needs of its runtime: a run that takes and gives back state."""

    async def _run_in_session(
        self,
        request: RunRequest,
        state: bytes | None,
        max_state_bytes: int,
        commit_on_failure: bool = False,
        resume: Journal | None = None,
        decisions: Mapping[str, Decision] | None = None,
    ) -> tuple[RunResult, Any]: ...


class Session:
    """Runs of one runtime that share the program's globals, one after another."""

    def __init__(
        self,
        runtime: SessionRunner,
        state: bytes | None,
        max_state_bytes: int,
        commit_on_failure: bool = False,
    ) -> None:
        if state is not None and not isinstance(state, bytes):
            raise TypeError(
                f"state must be bytes (a blob from Session.state), not {type(state).__name__}"
            )
        if type(max_state_bytes) is not int or max_state_bytes < 1:
            raise ValueError(f"max_state_bytes must be a positive int, got {max_state_bytes!r}")
        self._runtime = runtime
        self._state = state or b""
        self._names: tuple[str, ...] = ()
        self.max_state_bytes = max_state_bytes
        self.commit_on_failure = commit_on_failure
        """Also keep the names a failed run assigned before its exception, as Python's REPL
        does (a run killed by a budget, the heap cap or an abort still changes nothing)."""
        self._lock = anyio.Lock()

    @property
    def state(self) -> bytes:
        """The current state as an opaque blob (b"" before the first successful run)."""
        return self._state

    @property
    def names(self) -> tuple[str, ...]:
        """The names the state carries (known after the first successful run of this object)."""
        return self._names

    async def run(
        self,
        request: RunRequest,
        *,
        resume: Journal | None = None,
        decisions: Mapping[str, Decision] | None = None,
    ) -> RunResult:
        """Run ``request`` in a fresh child with the session's state; a successful run's
        globals become the state (with ``commit_on_failure``, also a failed run's, up to its
        exception); runs of one session take turns. A paused run commits nothing; its resume
        (``resume=``, from the same state) commits as any run."""
        async with self._lock:
            result, state = await self._runtime._run_in_session(
                request,
                self._state,
                self.max_state_bytes,
                self.commit_on_failure,
                resume,
                decisions,
            )
            kept = result.ok or (
                self.commit_on_failure
                and result.error is not None
                and result.error.kind in ("exception", "invalid_completion")
            )
            if kept and state is not None:  # a paused run commits nothing
                self._state, self._names = state.blob, tuple(state.names)
            return result

    async def __aenter__(self) -> Session:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        return None

    def __repr__(self) -> str:
        return f"<Session of {self._runtime!r}: {len(self._state)} bytes of state>"


class SessionRuntime:
    """A ``CodeRuntime`` whose runs all go to one session (code mode over it carries the
    state); ``runtime`` is the one the session runs on, closed by its owner."""

    language = "python"

    def __init__(self, runtime: CodeRuntime, session: Session) -> None:
        self.inner = runtime
        self.session = session

    @property
    def isolation(self) -> str:
        """The isolation level of the runtime the session runs on."""
        return self.inner.isolation

    async def run(
        self,
        request: RunRequest,
        *,
        resume: Journal | None = None,
        decisions: Mapping[str, Decision] | None = None,
    ) -> RunResult:
        """One run of the session, in a fresh child carrying the state."""
        return await self.session.run(request, resume=resume, decisions=decisions)

    async def aclose(self) -> None:
        """Nothing: the runtime's owner closes it."""

    async def __aenter__(self) -> SessionRuntime:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        return None
