"""MCP servers as bindings: start stdio servers, list their tools, register them as tools."""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import shlex
import tempfile
from collections.abc import AsyncIterator, Callable, Iterable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import IO, TYPE_CHECKING, Any, Final

import anyio

from host.tools import Json, Output, ToolDefinition, ToolError, define_tool, thaw
from host.tools import ToolRegistry as _Registry

from ._exceptions import McpConfigError, McpServerError, McpUnavailableError
from ._schema import loosen_schema

if TYPE_CHECKING:
    from mcp import Client
    from mcp.types import CallToolResult, Tool

__all__ = (
    "McpServerSpec",
    "McpServers",
    "load_mcp_config",
    "parse_mcp_option",
    "require_mcp",
    "result_value",
    "tool_name",
)

INSTALL_HINT: Final = "MCP support needs the mcp extra: pip install 'dsh-code[mcp]'"
_SERVER_NAME: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9-]*(?:_[A-Za-z0-9-]+)*\Z")
_BAD_CHARS: Final = re.compile(r"[^A-Za-z0-9_-]")
_STDERR_TAIL: Final = 2_000


def require_mcp() -> None:
    """Raise ``McpUnavailableError`` with the install hint when ``mcp`` cannot be imported."""
    try:
        import mcp  # noqa: F401
    except ImportError as exc:
        raise McpUnavailableError(INSTALL_HINT) from exc


@dataclass(frozen=True)
class McpServerSpec:
    """How to start one stdio MCP server: its name (the tool prefix), command, args, env."""

    name: str
    command: str
    args: tuple[str, ...] = ()
    env: Mapping[str, str] | None = None
    cwd: str | None = None

    def __post_init__(self) -> None:
        if not _SERVER_NAME.match(self.name):
            raise McpConfigError(
                f"MCP server name {self.name!r} must be letters, digits, '-' and single '_'"
            )
        if not self.command:
            raise McpConfigError(f"MCP server {self.name!r} has an empty command")

    @property
    def display(self) -> str:
        """The command line, quoted for messages."""
        return shlex.join([self.command, *self.args])


def parse_mcp_option(value: str) -> McpServerSpec:
    """``NAME=COMMAND ARGS...`` (split like a shell) -> a server spec."""
    name, sep, command = value.partition("=")
    if not sep or not name.strip():
        raise McpConfigError(f"--mcp takes NAME=COMMAND, got {value!r}")
    try:
        words = shlex.split(command)
    except ValueError as exc:
        raise McpConfigError(f"--mcp {name}: cannot split the command: {exc}") from None
    if not words:
        raise McpConfigError(f"--mcp {name}: the command is empty")
    return McpServerSpec(name.strip(), words[0], tuple(words[1:]))


def load_mcp_config(path: Path) -> list[McpServerSpec]:
    """Read an MCP client config file: ``{"mcpServers": {name: {command, args?, env?, cwd?}}}``."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise McpConfigError(f"cannot read the MCP config {path}: {exc}") from None
    except json.JSONDecodeError as exc:
        raise McpConfigError(f"the MCP config {path} is not JSON: {exc}") from None
    servers = data.get("mcpServers") if isinstance(data, dict) else None
    if not isinstance(servers, dict):
        raise McpConfigError(f"the MCP config {path} has no 'mcpServers' object")
    specs = []
    for name, entry in servers.items():
        where = f"{path}: mcpServers.{name}"
        if not isinstance(entry, dict):
            raise McpConfigError(f"{where} must be an object")
        if entry.get("disabled") is True:
            continue
        command = entry.get("command")
        if "url" in entry and command is None:
            raise McpConfigError(
                f"{where}: only stdio servers are supported (a 'command' string), not a 'url'"
            )
        if not isinstance(command, str):
            found = "no 'command'" if command is None else f"'command' {command!r}"
            raise McpConfigError(f"{where} needs a 'command' string (found {found})")
        args = entry.get("args", [])
        env = entry.get("env")
        cwd = entry.get("cwd")
        if not (isinstance(args, list) and all(isinstance(a, str) for a in args)):
            raise McpConfigError(f"{where}.args must be a list of strings")
        if env is not None and not (
            isinstance(env, dict) and all(isinstance(v, str) for v in env.values())
        ):
            raise McpConfigError(f"{where}.env must map names to strings")
        if cwd is not None and not isinstance(cwd, str):
            raise McpConfigError(f"{where}.cwd must be a string")
        specs.append(McpServerSpec(str(name), command, tuple(args), env, cwd))
    return specs


def tool_name(server: str, tool: str, taken: Iterable[str] = ()) -> str:
    """``mcp__<server>__<tool>``, made a valid registry name (≤ 64 chars) and unique."""
    base = f"mcp__{server}__{_BAD_CHARS.sub('_', tool)}"
    taken = set(taken)
    if len(base) <= 64 and base not in taken:
        return base
    digest = hashlib.sha256(f"{server}/{tool}".encode()).hexdigest()[:8]
    return f"{base[:55]}_{digest}"


def _is_part(item: Any) -> bool:
    return isinstance(item, Mapping) and (
        (item.get("type") == "text" and isinstance(item.get("text"), str))
        or (
            item.get("type") == "image"
            and isinstance(item.get("data"), str)
            and isinstance(item.get("mime_type"), str)
        )
    )


def _render(_args: Any, value: Any) -> Any:
    """Content parts stay parts (images reach the model); any other value renders as usual."""
    if isinstance(value, list | tuple) and value and all(_is_part(v) for v in value):
        return [thaw(v) for v in value]
    if isinstance(value, str):
        return value
    return json.dumps(thaw(value), ensure_ascii=False)


def _parts(result: CallToolResult) -> list[dict[str, Any]]:
    parts: list[dict[str, Any]] = []
    for block in result.content:
        kind = getattr(block, "type", None)
        if kind == "text":
            parts.append({"type": "text", "text": block.text})  # type: ignore[union-attr]
        elif kind == "image":
            parts.append(
                {"type": "image", "data": block.data, "mime_type": block.mime_type}  # type: ignore[union-attr]
            )
        elif kind == "resource_link":
            parts.append({"type": "text", "text": f"[resource: {block.uri}]"})  # type: ignore[union-attr]
        elif kind == "resource":
            inner = block.resource  # type: ignore[union-attr]
            text = getattr(inner, "text", None)
            parts.append(
                {
                    "type": "text",
                    "text": text if isinstance(text, str) else f"[resource: {inner.uri}]",
                }
            )
        else:
            mime = getattr(block, "mime_type", "")
            parts.append({"type": "text", "text": f"[{kind} content {mime}]".replace(" ]", "]")})
    return parts


def result_value(result: CallToolResult) -> Any:
    """Structured content, else the text (one string), else the content parts."""
    if result.structured_content is not None:
        return result.structured_content
    parts = _parts(result)
    if all(part["type"] == "text" for part in parts):
        return "\n".join(part["text"] for part in parts)
    return parts


def _error_text(result: CallToolResult) -> str:
    texts = [p["text"] for p in _parts(result) if p["type"] == "text" and p["text"]]
    if texts:
        return "\n".join(texts)
    if result.structured_content is not None:
        return json.dumps(result.structured_content, ensure_ascii=False)
    return "the tool reported an error"


@dataclass
class _Server:
    """One running server: its client session, listed tools, and what happened to it."""

    spec: McpServerSpec
    stderr: IO[bytes]
    client: Client | None = None
    tools: list[Tool] = field(default_factory=list)
    failure: str | None = None
    ready: anyio.Event = field(default_factory=anyio.Event)
    stop: anyio.Event = field(default_factory=anyio.Event)
    done: anyio.Event = field(default_factory=anyio.Event)

    def stderr_tail(self) -> str:
        try:
            size = os.fstat(self.stderr.fileno()).st_size
            data = os.pread(self.stderr.fileno(), _STDERR_TAIL, max(size - _STDERR_TAIL, 0))
        except (OSError, ValueError):
            return ""
        text = data.decode("utf-8", "replace").strip()
        return f"\nits stderr ends with:\n{text}" if text else ""

    def describe(self, what: str) -> str:
        return f"MCP server {self.spec.name!r} ({self.spec.display}) {what}"

    async def run(self, start_timeout: float) -> None:
        from mcp import Client, StdioServerParameters
        from mcp.client.stdio import stdio_client

        params = StdioServerParameters(
            command=self.spec.command,
            args=list(self.spec.args),
            env=dict(self.spec.env) if self.spec.env else None,
            cwd=self.spec.cwd,
        )
        started = False
        garbage: list[str] = []

        def on_garbage(exc: Exception) -> None:
            if not started and not garbage:  # during start: fail now, not at the timeout
                garbage.append(_excerpt(exc))
                scope.cancel()

        try:
            with anyio.CancelScope(deadline=anyio.current_time() + start_timeout) as scope:
                transport = _watched(stdio_client(params, errlog=self.stderr), on_garbage)  # type: ignore[arg-type]
                async with Client(transport, cache=None) as client:
                    self.tools = await _list_tools(client)
                    scope.deadline = math.inf
                    self.client = client
                    started = True
                    self.ready.set()
                    await self.stop.wait()
            if garbage:
                self.failure = (
                    self.describe(
                        "wrote a line that is not JSON-RPC on its stdout (the MCP channel; "
                        f"a server must log to stderr): {garbage[0]}"
                    )
                    + self.stderr_tail()
                )
            elif scope.cancelled_caught and not started:
                self.failure = (
                    self.describe(f"did not list its tools within {start_timeout:g} s")
                    + self.stderr_tail()
                )
        except Exception as exc:
            what = "stopped" if started else "did not start"
            self.failure = self.describe(f"{what}: {_explain(exc)}") + self.stderr_tail()
        finally:
            self.client = None
            if self.failure is None and not started:
                self.failure = self.describe("did not start") + self.stderr_tail()
            self.ready.set()
            self.done.set()


class _WatchedReceive:
    """A transport's read stream that reports the parse errors it carries (garbage lines)."""

    def __init__(self, inner: Any, on_garbage: Callable[[Exception], None]) -> None:
        self._inner = inner
        self._on_garbage = on_garbage

    def _seen(self, item: Any) -> Any:
        if isinstance(item, Exception):
            self._on_garbage(item)
        return item

    async def receive(self) -> Any:
        return self._seen(await self._inner.receive())

    def receive_nowait(self) -> Any:
        return self._seen(self._inner.receive_nowait())

    def __aiter__(self) -> _WatchedReceive:
        return self

    async def __anext__(self) -> Any:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    async def __aenter__(self) -> _WatchedReceive:
        await self._inner.__aenter__()
        return self

    async def __aexit__(self, *exc_info: Any) -> None:
        await self._inner.__aexit__(*exc_info)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


@asynccontextmanager
async def _watched(transport: Any, on_garbage: Callable[[Exception], None]) -> AsyncIterator[Any]:
    async with transport as (read, write):
        yield _WatchedReceive(read, on_garbage), write


def _excerpt(exc: Exception) -> str:
    """The offending line, from the SDK's validation error (or the error's first line)."""
    errors = getattr(exc, "errors", None)
    if callable(errors):
        try:
            for error in errors():
                value = error.get("input")
                if isinstance(value, str):
                    return repr(value[:120] + ("…" if len(value) > 120 else ""))
                if value is not None:
                    return repr(json.dumps(value, default=str)[:120])
        except Exception:  # an error object we do not know: its text will do
            pass
    return (str(exc).splitlines() or [type(exc).__name__])[0][:200]


def _explain(exc: BaseException) -> str:
    if isinstance(exc, BaseExceptionGroup):
        return "; ".join(_explain(e) for e in exc.exceptions)
    text = str(exc) or type(exc).__name__
    return f"{type(exc).__name__}: {text}" if text != type(exc).__name__ else text


async def _list_tools(client: Client) -> list[Tool]:
    tools: list[Tool] = []
    cursor: str | None = None
    for _ in range(1000):
        page = await client.list_tools(cursor=cursor)
        tools.extend(page.tools)
        cursor = page.next_cursor
        if not cursor:
            break
    return tools


class McpServers:
    """An async context manager: start the servers, expose their tools, stop them on exit.

    Each tool becomes ``mcp__<server>__<tool>``; a call goes through the registry's
    pipeline like any other tool. An error result, a crashed or hung server become
    ``ToolError`` failures (``TOOL_ERROR``); ``call_timeout_ms`` is each definition's
    ``timeout_ms`` (the registry's timeout policy: ``TOOL_TIMEOUT``) and, a second later,
    the session's own read timeout. Shutdown is bounded by ``shutdown_timeout_ms``.
    """

    def __init__(
        self,
        specs: Sequence[McpServerSpec],
        *,
        call_timeout_ms: int = 60_000,
        start_timeout_ms: int = 30_000,
        shutdown_timeout_ms: int = 10_000,
    ) -> None:
        names = [spec.name for spec in specs]
        duplicates = sorted({name for name in names if names.count(name) > 1})
        if duplicates:
            raise McpConfigError(f"MCP server names must be unique: {duplicates}")
        self.specs = list(specs)
        self.call_timeout_ms = call_timeout_ms
        self.start_timeout_ms = start_timeout_ms
        self.shutdown_timeout_ms = shutdown_timeout_ms
        self.definitions: list[ToolDefinition] = []
        self._servers: list[_Server] = []
        self._group: Any = None

    async def __aenter__(self) -> McpServers:
        require_mcp()
        group = anyio.create_task_group()
        await group.__aenter__()
        self._group = group
        try:
            for spec in self.specs:
                server = _Server(spec, tempfile.TemporaryFile())  # noqa: SIM115 - closed on exit
                self._servers.append(server)
                group.start_soon(server.run, self.start_timeout_ms / 1000)
            for server in self._servers:
                await server.ready.wait()
            failed = [s.failure for s in self._servers if s.client is None and s.failure]
            if failed:
                raise McpServerError("\n".join(failed))
            self.definitions = self._define()
        except BaseException:
            await self._close()
            raise
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self._close()

    async def _close(self) -> None:
        """Stop every server; the runners never raise, so the caller's exception stays as is."""
        group, self._group = self._group, None
        if group is None:
            return
        for server in self._servers:
            server.stop.set()
        with anyio.move_on_after(self.shutdown_timeout_ms / 1000, shield=True):
            for server in self._servers:
                await server.done.wait()
        group.cancel_scope.cancel()  # a server still stopping past the bound is abandoned
        try:
            await group.__aexit__(None, None, None)
        finally:
            for server in self._servers:
                server.stderr.close()

    def register(self, registry: _Registry) -> Callable[[], None]:
        """Register every MCP tool in ``registry``'s global scope; return a disposer."""
        disposers = [registry.register(definition) for definition in self.definitions]

        def dispose() -> None:
            for disposer in disposers:
                disposer()

        return dispose

    def _define(self) -> list[ToolDefinition]:
        taken: set[str] = set()
        out: list[ToolDefinition] = []
        for server in self._servers:
            for tool in server.tools:
                name = tool_name(server.spec.name, tool.name, taken)
                taken.add(name)
                out.append(self._definition(server, tool, name))
        return sorted(out, key=lambda d: d.name)

    def _definition(self, server: _Server, tool: Tool, name: str) -> ToolDefinition:
        timeout_ms = self.call_timeout_ms
        output: Any
        if tool.output_schema is not None:
            output = {"schema": loosen_schema(tool.output_schema), "render": _render}
        else:
            output = Output(Json(), _render)
        annotations = tool.annotations
        read_only = bool(annotations is not None and annotations.read_only_hint)

        async def execute(args: Any, _ctx: Any) -> Any:
            client = server.client
            if client is None:
                raise ToolError(
                    server.failure or server.describe("is not running"), code="TOOL_ERROR"
                )
            arguments = thaw(args) if args is not None else {}
            from mcp import MCPError

            try:
                result = await client.call_tool(
                    tool.name, arguments, read_timeout_seconds=timeout_ms / 1000 + 1
                )
            except MCPError as exc:
                if server.client is None or "closed" in exc.message.lower():
                    await anyio.sleep(0.05)  # let a dying server's last words reach stderr
                    raise ToolError(
                        server.describe(f"failed during {tool.name}: {exc.message}")
                        + server.stderr_tail(),
                        code="TOOL_ERROR",
                    ) from None
                raise ToolError(
                    f"{server.spec.name}/{tool.name}: MCP error {exc.code}: {exc.message}",
                    code="TOOL_ERROR",
                ) from None
            except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError) as exc:
                raise ToolError(
                    server.describe(f"is gone ({type(exc).__name__})") + server.stderr_tail(),
                    code="TOOL_ERROR",
                ) from None
            if result.is_error:
                raise ToolError(
                    f"{server.spec.name}/{tool.name} failed: {_error_text(result)}",
                    code="TOOL_ERROR",
                )
            return result_value(result)

        description = (
            tool.description or tool.title or f"{tool.name} (MCP server {server.spec.name})"
        )
        return define_tool(
            name=name,
            description=description,
            parameters=loosen_schema(tool.input_schema, top_object=True),
            output=output,
            execute=execute,
            timeout_ms=timeout_ms,
            concurrency_safe=read_only,
        )
