"""A FastMCP ``SandboxProvider`` that runs ``CodeMode`` programs on dsh-code's runtime."""

from __future__ import annotations

import inspect
import keyword
import logging
import re
from collections.abc import Callable, Mapping
from types import TracebackType
from typing import TYPE_CHECKING, Any, Final, Literal

if TYPE_CHECKING:
    import asyncio

    from runtime import CodeRuntime, Limits, RunError, RunResult

__all__ = ("DshSandboxProvider",)

_log = logging.getLogger("host.mcp")

#: Where the external functions live in the child; the prelude wraps them in FastMCP's shape.
NAMESPACE: Final = "dsh_external"
#: The input that carries the prelude's source (a global of the program until the prelude runs).
_PRELUDE_INPUT: Final = "_dsh_fastmcp_prelude"
_IDENTIFIER: Final = re.compile(r"[A-Za-z][A-Za-z0-9_]*\Z")
_LINE_REFS: Final = (
    re.compile(r'(?<=File "<program>", line )(\d+)'),
    re.compile(r"(?<=\(line )(\d+)"),
    re.compile(r"(?m)(?<=^line )(\d+)(?=:)"),
)

# What FastMCP's programs expect of an external function, as Monty gives it: a call starts at
# once (an un-awaited call still runs, as a task, when a loop is running) and a failure is
# ToolCallError (``.tool``, ``.code``) whose text is the plain message.
_PRELUDE_SOURCE: Final = """
def _dsh_fastmcp(external, names):
    import asyncio

    base = ToolCallError
    plains = {}

    def plain_of(kind):  # ToolCallError, or one that is a builtin type too, as its message
        if kind not in plains:
            plain = type(kind.__name__, (kind,), {"__str__": lambda self: self.message})
            plain.__qualname__, plain.__module__ = kind.__qualname__, kind.__module__
            plains[kind] = plain
        return plains[kind]

    def wrap(name):
        binding = getattr(external, name)

        async def call(*args, **kwargs):
            try:
                return await binding(args=list(args), kwargs=kwargs)
            except base as exc:
                kind = type(exc)
                if kind is not base and kind.__module__ != "builtins":
                    raise
                raise plain_of(kind)(exc.tool, exc.message, exc.code) from None

        def function(*args, **kwargs):
            coroutine = call(*args, **kwargs)
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError:
                return coroutine
            return loop.create_task(coroutine)

        function.__name__ = function.__qualname__ = name
        return function

    return {name: wrap(name) for name in names}
"""


def _prelude_line(names: list[str]) -> str:
    """The one line before the program: runs the prelude and leaves only the functions."""
    from runtime.lowlevel import HIDDEN_FILENAME  # the prelude's frames are left out

    return (
        f"exec(compile({_PRELUDE_INPUT}, {HIDDEN_FILENAME!r}, 'exec')); "
        f"globals().update(_dsh_fastmcp({NAMESPACE}, {names!r})); "
        f"del _dsh_fastmcp, {_PRELUDE_INPUT}"
    )


def _shift(text: str) -> str:
    for pattern in _LINE_REFS:
        text = pattern.sub(lambda m: str(max(int(m.group(1)) - 1, 1)), text)
    return text


def _unshift(error: RunError) -> RunError:
    """The run's error in the program's own line numbers (without the one-line prelude)."""
    import msgspec

    lineno = None if error.lineno is None else max(error.lineno - 1, 1)
    return msgspec.structs.replace(
        error,
        message=_shift(error.message),
        traceback=None if error.traceback is None else _shift(error.traceback),
        lineno=lineno,
    )


async def _invoke(name: str, fn: Callable[..., Any], payload: Any) -> Any:
    args = payload.get("args", []) if isinstance(payload, dict) else []
    kwargs = payload.get("kwargs", {}) if isinstance(payload, dict) else {}
    try:
        value = fn(*args, **kwargs)
        if inspect.isawaitable(value):
            value = await value
    except Exception as exc:
        from fastmcp.exceptions import NotFoundError

        from runtime.lowlevel import builtin_exception_name, tool_call_error

        code = "UNKNOWN_TOOL" if isinstance(exc, NotFoundError) else "TOOL_ERROR"
        # A builtin type stays that type in the program (``except KeyError`` works).
        raise tool_call_error(
            name, str(exc) or type(exc).__name__, code, builtin_exception_name(exc)
        ) from exc
    return value


class _Calls:
    """One run's external-function calls, each an asyncio task of its own.

    A call runs outside the run's cancel scope: cancelled, it is cancelled once and its
    cleanup (``finally: await ...``) can complete, as under FastMCP's own provider; the
    run waits for those cleanups, shielded and bounded, before it returns.
    """

    def __init__(self) -> None:
        self.pending: set[asyncio.Task[Any]] = set()
        self.cancelled: set[asyncio.Task[Any]] = set()

    def binding(self, name: str, fn: Callable[..., Any]) -> Callable[[Any], Any]:
        import asyncio

        import sniffio

        async def call(payload: Any) -> Any:
            if sniffio.current_async_library() != "asyncio":
                return await _invoke(name, fn, payload)  # trio: no tasks of our own to hand
            task = asyncio.get_running_loop().create_task(_invoke(name, fn, payload))
            self.pending.add(task)
            task.add_done_callback(self.pending.discard)
            try:
                return await asyncio.shield(task)
            except asyncio.CancelledError:
                self._cancel(task)
                raise

        return call

    def _cancel(self, task: asyncio.Task[Any]) -> None:
        if task not in self.cancelled:  # a second cancel would cancel its cleanup too
            self.cancelled.add(task)
            task.cancel()

    async def join(self, timeout: float) -> None:
        """Cancel what still runs (once) and wait for it, shielded, at most ``timeout`` s."""
        import asyncio

        import anyio

        tasks = tuple(self.pending)
        if not tasks:
            return
        for task in tasks:
            self._cancel(task)
        with anyio.CancelScope(shield=True), anyio.move_on_after(timeout):
            await asyncio.wait(tasks)
        for task in tasks:
            if not task.done():
                _log.warning(
                    "dsh-code: an external function still runs %.1f s after it was cancelled",
                    timeout,
                )
            elif not task.cancelled():
                task.exception()  # retrieved: its failure already reached the program


class DshSandboxProvider:
    """FastMCP's ``SandboxProvider`` protocol on a dsh-code ``CodeRuntime``.

    ``run(code, *, inputs=None, external_functions=None)`` runs ``code`` in a fresh
    contained child: ``inputs`` become globals, each external function (``call_tool``)
    is callable as in FastMCP's own sandbox, its failures raise ``ToolCallError`` whose
    text is the plain message, and the program's result (``return`` or a last expression)
    is returned. A failed run raises ``fastmcp.exceptions.ToolError`` with the failure kind,
    message and logs so far. Without a ``runtime``, runs go to the event loop's shared
    ``SubprocessRuntime`` (``host.adapters.shared_runtime``): started once, closed with the
    loop, so a provider holds no process and needs no ``aclose()``.
    """

    def __init__(
        self,
        runtime: CodeRuntime | None = None,
        *,
        limits: Limits | None = None,
        policy: Literal["python", "restricted"] = "python",
        on_log: Callable[[str], None] | None = None,
        max_concurrent_runs: int = 64,
        cleanup_timeout: float = 5.0,
    ) -> None:
        if type(max_concurrent_runs) is not int or max_concurrent_runs < 1:
            raise ValueError(
                f"max_concurrent_runs must be an int of at least 1, got {max_concurrent_runs!r}"
            )
        if not cleanup_timeout > 0:
            raise ValueError(f"cleanup_timeout must be positive, got {cleanup_timeout!r}")
        self._runtime = runtime
        self.limits = limits
        self.policy = policy
        self.on_log = on_log
        self.max_concurrent_runs = max_concurrent_runs
        """Runs at once on the shared runtime (unused with a ``runtime`` of the caller's)."""
        self.cleanup_timeout = cleanup_timeout
        """Seconds a cancelled external function may take to clean up before ``run`` returns."""

    async def __aenter__(self) -> DshSandboxProvider:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Nothing to close: a runtime passed in is the caller's, the shared one the loop's."""

    async def _get_runtime(self) -> CodeRuntime:
        if self._runtime is not None:
            return self._runtime
        from host.adapters import shared_runtime

        return await shared_runtime(max_concurrent_runs=self.max_concurrent_runs)

    async def run(
        self,
        code: str,
        *,
        inputs: dict[str, Any] | None = None,
        external_functions: dict[str, Callable[..., Any]] | None = None,
    ) -> Any:
        """Run ``code``; return its result, or raise FastMCP's ``ToolError`` on failure."""
        from runtime import Limits, RunRequest

        functions: Mapping[str, Callable[..., Any]] = external_functions or {}
        for name in functions:
            if not _IDENTIFIER.match(name) or keyword.iskeyword(name):
                raise ValueError(f"external function name {name!r} is not a plain identifier")
        names = sorted(functions)
        given = dict(inputs or {})
        calls = _Calls()
        if names:
            program = f"{_prelude_line(names)}\n{code}"
            given[_PRELUDE_INPUT] = _PRELUDE_SOURCE
        else:
            program = code
        request = RunRequest(
            program=program,
            bindings={
                f"{NAMESPACE}.{name}": calls.binding(name, functions[name]) for name in names
            },
            inputs=given,
            limits=self.limits or Limits(),
            policy=self.policy,
            on_log=self.on_log,
        )
        runtime = await self._get_runtime()
        try:
            result = await runtime.run(request)
        finally:
            await calls.join(self.cleanup_timeout)
        if result.error is not None:
            if result.error.kind == "aborted":
                await _reraise_cancellation()
            raise _tool_error(result, shifted=bool(names))
        return result.value if result.has_value else None


async def _reraise_cancellation() -> None:
    """A run aborted because its caller was cancelled: let the cancellation win (wait_for)."""
    import asyncio

    import anyio.lowlevel

    await anyio.lowlevel.checkpoint_if_cancelled()
    try:
        task = asyncio.current_task()
    except RuntimeError:  # not on asyncio
        return
    if task is not None and task.cancelling():
        raise asyncio.CancelledError


def _tool_error(result: RunResult, *, shifted: bool) -> Exception:
    from fastmcp.exceptions import ToolError

    assert result.error is not None
    error = _unshift(result.error) if shifted else result.error
    text = f"the program failed ({error.kind}): {error.message}"
    if result.logs:
        text += "\nlogs so far:\n" + "\n".join(result.logs)
    return ToolError(text)
