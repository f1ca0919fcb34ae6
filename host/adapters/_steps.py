"""An agent's steps: each a run in a fresh child within one session, tools run on the host."""

from __future__ import annotations

import functools
import inspect
import threading
import weakref
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import anyio
import anyio.from_thread
import anyio.to_thread

from host.adapters._program import (
    FINAL_ANSWER_SIGNAL,
    NAMESPACE,
    OUR_NAMES,
    Program,
    build_program,
    jsonable,
    program_inputs,
)
from host.sandbox import Session, SubprocessRuntime
from runtime import Limits, RunRequest, RunResult
from runtime.lowlevel import builtin_exception_name, tool_call_error

__all__ = ("StepOutcome", "Steps", "SyncSteps", "ToolSpec", "make_limits")


def make_limits(
    limits: Limits | None,
    *,
    compute_ms: int | None,
    max_wall_ms: int | None,
    max_heap_mb: int | None,
    max_output_bytes: int | None,
    max_parallel_sub_calls: int | None,
) -> Limits:
    """``limits`` (or the defaults) with each limit given as an argument put in."""
    import msgspec

    given = {
        "compute_ms": compute_ms,
        "max_wall_ms": max_wall_ms,
        "max_heap_mb": max_heap_mb,
        "max_output_bytes": max_output_bytes,
        "max_parallel_sub_calls": max_parallel_sub_calls,
    }
    return msgspec.structs.replace(
        limits or Limits(), **{key: value for key, value in given.items() if value is not None}
    )


@dataclass(frozen=True)
class ToolSpec:
    """A host callable the program calls by name: its parameters in positional order."""

    call: Callable[..., Any]
    params: tuple[str, ...]
    blocking: bool = True
    """True: a plain function, run in a worker thread; False: ``call`` returns an awaitable."""
    encode: Callable[[Any], Any] = jsonable
    """The value as the program gets it: lossless JSON (by default, what is not JSON as text)."""


@dataclass
class StepOutcome:
    """How a step went, in what the frameworks need."""

    output: Any = None
    """The last bare expression's value (lossless JSON, else its ``str()``), or the epilogue's."""
    logs: str = ""
    """What the program printed, then notes on variables that could not be kept."""
    error: str | None = None
    """The failure as the model should read it (the traceback kept), None if the step worked."""
    kind: str | None = None
    is_final_answer: bool = False
    answer: Any = None
    dropped: dict[str, str] = field(default_factory=dict)


def _params_of(fn: Callable[..., Any]) -> tuple[str, ...]:
    """The parameter names of a Python callable, in order (``*args`` and ``**kw`` left out)."""
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):
        return ()
    kinds = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    return tuple(p.name for p in signature.parameters.values() if p.kind in kinds)


def function_spec(fn: Callable[..., Any]) -> ToolSpec:
    """A ``ToolSpec`` for a plain or async Python function."""
    return ToolSpec(fn, _params_of(fn), blocking=not inspect.iscoroutinefunction(fn))


class Steps:
    """The steps of one agent: runs of one session, so variables survive from step to step.

    Without a ``runtime`` the steps run on the event loop's shared runtime
    (``shared_runtime(**runtime_options)``), whose processes end with the loop.
    """

    def __init__(
        self,
        limits: Limits,
        *,
        runtime: SubprocessRuntime | None = None,
        max_state_bytes: int | None = None,
        runtime_options: Mapping[str, Any] | None = None,
    ) -> None:
        self.limits = limits
        self._runtime = runtime
        self._options = dict(runtime_options or {})
        self._max_state_bytes = max_state_bytes
        self._session: Session | None = None
        self._lock: anyio.Lock | None = None

    @property
    def state(self) -> bytes:
        """The session's state blob (b"" before the first successful step)."""
        return self._session.state if self._session is not None else b""

    @property
    def names(self) -> tuple[str, ...]:
        """The variables the session carries."""
        return self._session.names if self._session is not None else ()

    async def _get_session(self) -> Session:
        if self._session is None:
            runtime = self._runtime
            if runtime is None:
                from host.adapters._runtime import shared_runtime

                runtime = await shared_runtime(**self._options)
            if self._max_state_bytes is None:
                self._session = runtime.session()
            else:
                self._session = runtime.session(max_state_bytes=self._max_state_bytes)
        return self._session

    async def run(
        self,
        code: str,
        tools: Mapping[str, ToolSpec],
        *,
        final: str | None = None,
        variables: Mapping[str, Any] | None = None,
        epilogue: str = "",
        serializer: str = "",
    ) -> StepOutcome:
        """Run one step; ``final`` names the tool whose call ends the step as the answer;
        ``serializer`` is the source of the safe serializer a final answer that is not JSON
        is sent with (its tool decodes ``SAFE_ARGUMENT``)."""
        if self._lock is None:
            self._lock = anyio.Lock()
        answers: list[Any] = []
        bindings = {
            f"{NAMESPACE}.{name}": _binding(name, spec, answers if name == final else None)
            for name, spec in tools.items()
        }
        program = build_program(code, final if final in tools else None, epilogue=epilogue)
        request = RunRequest(
            program=program.text,
            bindings=bindings,
            inputs=program_inputs(
                {n: s.params for n, s in tools.items()}, variables or {}, serializer
            ),
            limits=self.limits,
            call_style="sync",
        )
        async with self._lock:
            result = await (await self._get_session()).run(request)
        return _outcome(result, set(tools), answers, program)

    async def aclose(self) -> None:
        """Forget the session (its variables); the runtime is the caller's or the loop's."""
        self._session = None


def _binding(name: str, spec: ToolSpec, answers: list[Any] | None) -> Callable[[Any], Any]:
    from runtime import ToolCallError

    async def call(args: Any) -> Any:
        kwargs = args if isinstance(args, dict) else {}
        try:
            if spec.blocking:
                value = await anyio.to_thread.run_sync(functools.partial(spec.call, **kwargs))
            else:
                value = await spec.call(**kwargs)
        except ToolCallError:
            raise
        except Exception as exc:  # the program sees the tool's name, and a builtin type as it
            raise tool_call_error(
                name, str(exc) or type(exc).__name__, "TOOL_ERROR", builtin_exception_name(exc)
            ) from exc
        if answers is not None:
            answers.append(value)
            return jsonable(value)  # the step ends: the program does nothing more with it
        if spec.encode is jsonable:
            return jsonable(value)
        return await anyio.to_thread.run_sync(spec.encode, value)  # an image's PNG, say

    return call


def _outcome(
    result: RunResult, tools: set[str], answers: list[Any], program: Program
) -> StepOutcome:
    logs = "".join(f"{line}\n" for line in result.logs)
    dropped = {
        name: why
        for name, why in result.state_dropped.items()
        if name not in OUR_NAMES and name not in tools
    }
    for name, why in dropped.items():
        logs += f"[variable {name!r} is not kept for the next step: {why}]\n"
    out = StepOutcome(logs=logs, dropped=dropped)
    error = result.error
    if answers and (error is None or error.exception_type == FINAL_ANSWER_SIGNAL):
        out.is_final_answer, out.answer, out.output = True, answers[-1], answers[-1]
        return out
    if error is not None:
        out.kind = error.kind
        message = program.shown(error.message)
        out.error = message if error.kind == "exception" else f"{error.kind}: {message}"
        return out
    out.output = result.value if result.has_value else None
    return out


class SyncSteps:
    """``Steps`` for a synchronous framework: its event loop on a thread of its own.

    Closed by ``close()``, or when it is garbage-collected.
    """

    def __init__(self, steps: Steps) -> None:
        self.steps = steps
        self._box: dict[str, Any] = {}
        self._finalizer = weakref.finalize(self, _close_portal, self._box, steps)

    def _portal(self) -> anyio.from_thread.BlockingPortal:
        portal = self._box.get("portal")
        if portal is None:
            manager = anyio.from_thread.start_blocking_portal("asyncio")
            portal = manager.__enter__()
            self._box.update(portal=portal, manager=manager, thread=_portal_thread(portal))
        return portal

    def run(self, code: str, tools: Mapping[str, ToolSpec], **kwargs: Any) -> StepOutcome:
        """``Steps.run`` from any thread but the portal's own."""
        portal = self._portal()
        return portal.call(functools.partial(self.steps.run, code, tools, **kwargs))

    def close(self) -> None:
        """Close the runtime and stop the thread (idempotent)."""
        self._finalizer()


def _portal_thread(portal: anyio.from_thread.BlockingPortal) -> threading.Thread | None:
    return portal.call(threading.current_thread)


def _close_portal(box: dict[str, Any], steps: Steps) -> None:
    portal = box.pop("portal", None)
    if portal is None:
        return
    if box.get("thread") is threading.current_thread():
        return  # collected on the portal's own thread: the host's exit ends the children
    try:
        portal.call(steps.aclose)
    finally:  # the loop ends: its shared runtime closes, every process of it gone
        box.pop("manager").__exit__(None, None, None)
