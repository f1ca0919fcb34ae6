"""A FastMCP ``SandboxProvider`` that runs ``CodeMode`` programs on dsh-code's runtime."""

from __future__ import annotations

import inspect
import keyword
import re
from collections.abc import Callable, Mapping
from types import TracebackType
from typing import TYPE_CHECKING, Any, Final, Literal

if TYPE_CHECKING:
    from runtime import CodeRuntime, Limits, RunError, RunResult

__all__ = ("DshSandboxProvider",)

#: Where the external functions live in the child; the prelude rebinds them positionally.
NAMESPACE: Final = "dsh_external"
_IDENTIFIER: Final = re.compile(r"[A-Za-z][A-Za-z0-9_]*\Z")
_LINE_REFS: Final = (
    re.compile(r'(?<=File "<program>", line )(\d+)'),
    re.compile(r"(?<=\(line )(\d+)"),
    re.compile(r"(?m)(?<=^line )(\d+)(?=:)"),
)


class _ExternalError(Exception):
    """An external function failed: ``ToolCallError`` in the program, under its own name."""

    def __init__(self, tool: str, message: str) -> None:
        super().__init__(message)
        self.tool = tool
        self.message = message
        self.code = "TOOL_ERROR"


def _prelude(names: list[str]) -> str:
    """One line giving each external function its Python call shape (positional arguments)."""
    return "; ".join(
        f"{name} = lambda *args, **kwargs: {NAMESPACE}.{name}(args=list(args), kwargs=kwargs)"
        for name in names
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


def _binding(name: str, fn: Callable[..., Any]) -> Callable[[Any], Any]:
    async def call(payload: Any) -> Any:
        args = payload.get("args", []) if isinstance(payload, dict) else []
        kwargs = payload.get("kwargs", {}) if isinstance(payload, dict) else {}
        try:
            value = fn(*args, **kwargs)
            if inspect.isawaitable(value):
                value = await value
        except Exception as exc:
            raise _ExternalError(name, str(exc) or type(exc).__name__) from exc
        return value

    return call


class DshSandboxProvider:
    """FastMCP's ``SandboxProvider`` protocol on a dsh-code ``CodeRuntime``.

    ``run(code, *, inputs=None, external_functions=None)`` runs ``code`` in a fresh
    contained child: ``inputs`` become globals, each external function (``call_tool``)
    is callable as in FastMCP's own sandbox, its failures raise ``ToolCallError``, and the
    program's result (``return`` or a last expression) is returned. A failed run raises
    ``fastmcp.exceptions.ToolError`` with the failure kind, message and logs so far.
    Without a ``runtime``, a ``SubprocessRuntime`` is started on first use and closed by
    ``aclose()`` (or ``async with``).
    """

    def __init__(
        self,
        runtime: CodeRuntime | None = None,
        *,
        limits: Limits | None = None,
        policy: Literal["python", "restricted"] = "python",
        on_log: Callable[[str], None] | None = None,
    ) -> None:
        self._runtime = runtime
        self._owned = runtime is None
        self.limits = limits
        self.policy = policy
        self.on_log = on_log

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
        """Close the runtime this provider started (a runtime passed in is the caller's)."""
        runtime, self._runtime = self._runtime, None
        if runtime is not None and self._owned:
            await runtime.aclose()

    def _get_runtime(self) -> CodeRuntime:
        if self._runtime is None:
            from host.sandbox import SubprocessRuntime

            self._runtime = SubprocessRuntime()
            self._owned = True
        return self._runtime

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
        program = f"{_prelude(names)}\n{code}" if names else code
        request = RunRequest(
            program=program,
            bindings={f"{NAMESPACE}.{name}": _binding(name, functions[name]) for name in names},
            inputs=dict(inputs or {}),
            limits=self.limits or Limits(),
            policy=self.policy,
            on_log=self.on_log,
        )
        result = await self._get_runtime().run(request)
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
