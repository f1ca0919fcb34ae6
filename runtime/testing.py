"""``InProcessRuntime``: a fake ``CodeRuntime`` for unit tests of the layers above a runtime.

It runs each program in the caller's own process, with the same program semantics (a
module, top-level ``await`` and ``return``, the last-expression rule, asyncio for awaiting
programs), the same call styles, the same lossless-JSON rule, the restricted policy's guards
and the same failure kinds where they apply. An awaiting program runs on the caller's asyncio
loop, or on an asyncio loop of its own in a worker thread under trio and in the sync call
style. It contains nothing: no process, no limits but the wall budget and the output cap
(``print`` is what it captures), no isolation whatever. Never run a program you do not trust
with it. Its runs keep journals and resume as every backend's do (the call ledger is the
same), but it fixes no seed: its journals say hash seed 0, and ``random`` is the caller's.
"""

from __future__ import annotations

import asyncio
import builtins
import functools
import itertools
import threading
import time
import traceback
import types
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import msgspec

from runtime._checks import check_request
from runtime._contract import RunError, RunRequest, RunResult, RunStats
from runtime._errors import RuntimeClosedError, ToolCallError, tool_call_error
from runtime._journal import Decision, Journal
from runtime._json import JsonTooLarge, bare_repr, json_problem
from runtime._ledger import CallLedger
from runtime._program import (
    ABSENT,
    FILENAME,
    Bare,
    ProgramRejected,
    compile_program,
    install_helpers,
    is_async,
    run_async,
    run_sync,
)

__all__ = ("InProcessRuntime",)

_helpers = dict(builtins.__dict__)
install_helpers(_helpers)
_helpers["ToolCallError"] = ToolCallError


class _Namespace:
    def __init__(self, name: str) -> None:
        self.__dict__["_name"] = name

    def __repr__(self) -> str:
        return f"<bindings {self.__dict__['_name']}>"


class _Logs:
    """What the program printed, line by line, held to the output cap."""

    def __init__(self, cap: int, on_log: Callable[[str], None] | None) -> None:
        self.lines: list[str] = []
        self.bytes = 0
        self.over = False
        self._cap = cap
        self._on_log = on_log

    def print(self, *args: Any, sep: str | None = " ", end: str | None = "\n", **_: Any) -> None:
        text = (sep if sep is not None else " ").join(str(a) for a in args)
        text += end if end is not None else "\n"
        for line in text.splitlines():
            self.bytes += len(line.encode()) + 1
            if self.bytes > self._cap:
                self.over = True
                return
            self.lines.append(line)
            if self._on_log is not None:
                self._on_log(line)


class InProcessRuntime:
    """A ``CodeRuntime`` that runs programs in this process: for tests only (no containment)."""

    language = "python"
    isolation = "in-process"

    def __init__(self) -> None:
        self._closed = False
        self.runs = 0

    async def __aenter__(self) -> InProcessRuntime:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Later runs raise ``RuntimeClosedError``."""
        self._closed = True

    async def run(
        self,
        request: RunRequest,
        *,
        resume: Journal | None = None,
        decisions: Mapping[str, Decision] | None = None,
    ) -> RunResult:
        """Run one program here; resolves with the result whatever the program did
        (``resume``: replay a journal first, as every backend does; see ``CodeRuntime``)."""
        if self._closed:
            raise RuntimeClosedError("this InProcessRuntime is closed")
        check_request(request)  # the caller's mistakes, as every real backend rejects them
        ledger = CallLedger(request, resume=resume, decisions=decisions)
        return ledger.finish(await self._run(request, ledger))

    async def _run(self, request: RunRequest, ledger: CallLedger) -> RunResult:
        self.runs += 1
        started = time.monotonic()
        logs = _Logs(request.limits.max_output_bytes, ledger.on_log)
        try:
            code = compile_program(request.program, request.policy)
        except ProgramRejected as exc:
            error = RunError(
                kind="parse",
                message=exc.message,
                lineno=exc.lineno,
                exception_type=exc.exception_type,
            )
            return self._result(logs, ABSENT, error, started)
        loop = _Loop()
        stopped: list[RunError] = []

        def stop(error: RunError) -> None:
            if not stopped:
                stopped.append(error)
                loop.cancel_work()

        ledger.stop = stop
        namespace = self._module(request, logs, loop, ledger)
        try:
            value = await loop.within(
                request.limits.max_wall_ms / 1000, self._execute(code, namespace, request, loop)
            )
        except _Stopped:
            return self._result(logs, ABSENT, stopped[0], started)
        except TimeoutError:
            message = f"the run passed its wall-clock budget of {request.limits.max_wall_ms} ms"
            return self._result(
                logs, ABSENT, RunError(kind="budget", budget="wall", message=message), started
            )
        except _Raised as raised:  # the program's exception (SystemExit included)
            return self._result(logs, ABSENT, _exception(raised.program_error), started)
        if logs.over:
            message = f"the logs passed max_output_bytes ({request.limits.max_output_bytes})"
            return self._result(
                logs, ABSENT, RunError(kind="output_limit", message=message), started
            )
        if value is ABSENT:
            return self._result(logs, ABSENT, None, started)
        bare = isinstance(value, Bare)
        if bare:
            value = value.value
        try:
            problem = json_problem(value, max_bytes=request.limits.max_output_bytes - logs.bytes)
        except JsonTooLarge:
            message = (
                f"the result's JSON would pass max_output_bytes ({request.limits.max_output_bytes})"
            )
            return self._result(
                logs, ABSENT, RunError(kind="output_limit", message=message), started
            )
        if problem is not None and bare:
            text, problem = bare_repr(value, problem)
            if (
                text is not None
                and logs.bytes + len(text.encode()) > request.limits.max_output_bytes
            ):
                message = "the result's repr would pass max_output_bytes"
                error = RunError(
                    kind="output_limit", message=f"{message} ({request.limits.max_output_bytes})"
                )
                return self._result(logs, ABSENT, error, started)
            if text is not None:
                result = self._result(logs, text, None, started)
                return msgspec.structs.replace(result, value_is_repr=True)
        if problem is not None:
            error = RunError(
                kind="invalid_completion", message=f"the result is not lossless JSON: {problem}"
            )
            return self._result(logs, ABSENT, error, started)
        return self._result(logs, value, None, started)

    def _module(
        self, request: RunRequest, logs: _Logs, loop: _Loop, ledger: CallLedger
    ) -> dict[str, Any]:
        namespace = types.ModuleType("__main__").__dict__
        own = dict(_helpers)
        own["print"] = logs.print
        namespace.update(__file__=FILENAME, __builtins__=own)
        namespace.update(request.inputs)
        seq = itertools.count(1)  # calls numbered in the order the program issues them
        for name, binding in request.bindings.items():
            *path, leaf = name.split(".")
            holder: dict[str, Any] = namespace
            for part in path:
                holder = holder.setdefault(part, _Namespace(part)).__dict__
            holder[leaf] = _bind(name, binding, request.call_style, loop, (ledger, seq))
        if request.policy == "restricted":  # the policy's run-time guards, as in the child
            from runtime._restricted import restricted_globals

            namespace.update(restricted_globals())  # last: no input may shadow a guard hook
            restricted = namespace["__builtins__"]
            install_helpers(restricted)
            restricted.update(print=logs.print, ToolCallError=ToolCallError)
        return namespace

    async def _execute(
        self, code: types.CodeType, namespace: dict[str, Any], request: RunRequest, loop: _Loop
    ) -> Any:
        if is_async(code) and loop.program_needs_own_loop(request.call_style):
            return await loop.on_own_loop(code, namespace)
        try:
            if is_async(code):
                return await run_async(code, namespace)
            if request.call_style == "sync":  # its calls block: not on this loop's thread
                return await loop.in_thread(run_sync, code, namespace)
            return run_sync(code, namespace)
        except BaseException as exc:
            if _is_cancellation(exc):
                raise  # ours: the wall budget ran out, or the caller cancelled
            raise _Raised(exc) from None

    def _result(self, logs: _Logs, value: Any, error: RunError | None, started: float) -> RunResult:
        stats = RunStats(
            isolation=self.isolation,
            compute_ms=0.0,
            wall_ms=round((time.monotonic() - started) * 1000, 3),
            calls=0,
            dropped_frames=0,
        )
        if value is ABSENT:
            return RunResult(logs=logs.lines, error=error, stats=stats)
        return RunResult(logs=logs.lines, value=value, error=error, stats=stats)


class _Loop:
    """The caller's event loop, asyncio's or trio's (imported only when that is the one)."""

    def __init__(self) -> None:
        try:
            self.asyncio: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            self.asyncio = None
            import trio

            self.trio_token = trio.lowlevel.current_trio_token()
        self.thread = threading.get_ident()
        self._cancel: Callable[[], object] | None = None
        self._cancelled = False

    def cancel_work(self) -> None:
        """Stop the work ``within`` is waiting for: it raises ``_Stopped``."""
        self._cancelled = True
        if self._cancel is not None:
            self._cancel()

    async def within(self, seconds: float, work: Awaitable[Any]) -> Any:
        """``work``'s value; ``TimeoutError`` after ``seconds``, ``_Stopped`` once
        ``cancel_work`` was called."""
        if self.asyncio is not None:
            task = asyncio.ensure_future(work)
            self._cancel = task.cancel
            try:
                return await asyncio.wait_for(task, seconds)
            except asyncio.CancelledError:
                current = asyncio.current_task()
                if self._cancelled and (current is None or not current.cancelling()):
                    raise _Stopped from None  # ours, not the caller's
                raise
            finally:
                self._cancel = None
        import trio

        with trio.move_on_after(seconds):
            with trio.CancelScope() as scope:
                self._cancel = scope.cancel
                try:
                    return await work
                finally:
                    self._cancel = None
            raise _Stopped
        raise TimeoutError

    async def in_thread(self, func: Callable[..., Any], *args: Any) -> Any:
        """``func(*args)`` in a worker thread; a cancelled caller stops waiting for it."""
        if self.asyncio is not None:
            return await asyncio.to_thread(func, *args)
        import trio

        return await trio.to_thread.run_sync(func, *args, abandon_on_cancel=True)

    def program_needs_own_loop(self, call_style: str) -> bool:
        """Whether an awaiting program runs on an asyncio loop of its own, as in the child:
        under trio (programs are asyncio programs) and when its calls block (sync style)."""
        return self.asyncio is None or call_style == "sync"

    async def on_own_loop(self, code: types.CodeType, namespace: dict[str, Any]) -> Any:
        """Run an awaiting program on a new asyncio loop in a worker thread; its value."""
        ready = threading.Event()
        stop: list[Callable[[], object]] = []

        def target() -> tuple[bool, Any]:
            own = asyncio.new_event_loop()
            try:
                task = own.create_task(run_async(code, namespace))
                stop.append(lambda: own.call_soon_threadsafe(task.cancel))
                ready.set()
                try:
                    return True, own.run_until_complete(task)
                except BaseException as exc:  # the program's, or the cancel of a stopped run
                    return False, exc
            finally:
                ready.set()
                own.close()

        try:
            completed, outcome = await self.in_thread(target)
        except BaseException:  # the wall budget ran out, or the caller cancelled: stop it
            ready.wait()
            for cancel in stop:
                cancel()
            raise
        if not completed:
            raise _Raised(outcome)
        return outcome

    async def hop(self, func: Callable[[Any], Awaitable[Any]], arg: Any) -> Any:
        """Await ``func(arg)`` on the caller's loop from a program's own loop."""
        return await asyncio.get_running_loop().run_in_executor(None, self.from_thread, func, arg)

    def from_thread(self, func: Callable[[Any], Awaitable[Any]], arg: Any) -> Any:
        """Run ``func(arg)`` on the loop from another thread; its value."""
        if self.asyncio is not None:
            return asyncio.run_coroutine_threadsafe(func(arg), self.asyncio).result()  # type: ignore[arg-type]
        import trio

        return trio.from_thread.run(func, arg, trio_token=self.trio_token)


def _is_cancellation(exc: BaseException) -> bool:
    return isinstance(exc, asyncio.CancelledError) or type(exc).__name__ == "Cancelled"


class _Stopped(BaseException):
    """The run's ledger stopped it (a held call, a replay that diverged, a full journal)."""


class _Raised(BaseException):
    """Carries the program's own exception past ``wait_for`` (which would take a
    ``CancelledError`` or ``SystemExit`` of the program for its own)."""

    def __init__(self, program_error: BaseException) -> None:
        super().__init__()
        self.program_error = program_error


def _exception(exc: BaseException) -> RunError:
    te = traceback.TracebackException.from_exception(exc, compact=True)
    te.stack = traceback.StackSummary.from_list([f for f in te.stack if f.filename == FILENAME])
    text = "".join(te.format()).rstrip("\n")
    lineno = next((f.lineno for f in reversed(te.stack)), None)
    return RunError(
        kind="exception",
        message=text,
        exception_type=type(exc).__qualname__,
        traceback=text,
        lineno=lineno,
    )


def _bind(
    name: str,
    binding: Callable[[Any], Awaitable[Any]],
    style: str,
    loop: _Loop,
    ids: tuple[CallLedger, itertools.count[int]],
) -> Any:
    def arguments(args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        if not args:
            return kwargs
        if len(args) == 1 and not kwargs and type(args[0]) is dict:
            return args[0]
        raise TypeError(f"{name}() takes keyword arguments (or one dict of them)")

    ledger = ids[0]

    async def call(args: Any, seq: int) -> Any:
        problem = json_problem(args)
        if problem is not None:
            raise TypeError(f"the arguments of binding {name} are not lossless JSON: {problem}")
        settled = await ledger.serve(seq, name, msgspec.json.encode(args), binding)
        if settled is None:  # held, or the run stopped: no answer, ever
            await ledger.wait_end()
            raise _Stopped
        if settled.failure is not None:
            failure = settled.failure
            raise tool_call_error(
                failure.tool, failure.message, failure.code, failure.exception_type
            )
        return msgspec.json.decode(settled.value or b"null")

    def issue() -> Callable[[Any], Awaitable[Any]]:  # numbered when issued, not answered
        return functools.partial(call, seq=next(ids[1]))

    if style == "sync":

        def plain(*args: Any, **kwargs: Any) -> Any:
            if threading.get_ident() == loop.thread:
                raise RuntimeError(f"{name}() was called plainly on the event loop's thread")
            return loop.from_thread(issue(), arguments(args, kwargs))

        return plain

    def awaited(*args: Any, **kwargs: Any) -> Any:
        if threading.get_ident() != loop.thread:  # awaited on the program's own loop
            return loop.hop(issue(), arguments(args, kwargs))
        return issue()(arguments(args, kwargs))

    return awaited
