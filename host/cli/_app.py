"""The ``dsh-code`` commands: run, sdk, tools, check, mcp."""

from __future__ import annotations

import json
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

import anyio
import typer
from rich.console import Console
from rich.live import Live
from rich.markup import escape
from rich.text import Text

from host.cli._bindings import SETUP_HOOK, Bindings, BindingsError, load_bindings
from host.cli._mcp import (
    McpConfigOption,
    McpOption,
    McpTimeoutOption,
    McpUsageError,
    mcp_definitions,
    mcp_specs,
    open_mcp,
)
from host.cli._session_log import SessionLog
from host.codemode import CodeModeConfig
from host.tools import ToolDefinition, ToolRegistry, ToolResult, ToolsConfig
from runtime import Limits, RunResult, RunStats, RuntimeUsageError

if TYPE_CHECKING:
    from host.mcp import McpServerSpec
    from host.sandbox import SubprocessRuntime

__all__ = ("app",)

app = typer.Typer(
    name="dsh-code",
    help="Run Python programs that call tools, each in a fresh contained child process.",
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2

BindingsOption = Annotated[
    list[Path],
    typer.Option(
        "--bindings",
        "-b",
        help="A Python file whose top-level tools are bound under tools.",
        show_default=False,
    ),
]


IsolationOption = Annotated[
    str,
    typer.Option(
        help="auto (namespaces where the kernel allows, else process), namespaces or process."
    ),
]
MaxProcessesOption = Annotated[
    int,
    typer.Option(min=4, help="Processes + threads a run may have (needs a pids cgroup)."),
]
NoCgroupsOption = Annotated[
    bool, typer.Option("--no-cgroups", help="Do not give runs cgroups of their own.")
]


@dataclass(frozen=True)
class _RuntimeOptions:
    """How ``dsh-code`` makes its ``SubprocessRuntime``."""

    isolation: str = "auto"
    max_processes: int = 1024
    use_cgroups: bool = True

    @classmethod
    def checked(cls, isolation: str, max_processes: int, no_cgroups: bool) -> _RuntimeOptions:
        if isolation not in ("auto", "namespaces", "process"):
            raise _fail_usage(f"--isolation must be auto, namespaces or process, not {isolation!r}")
        return cls(isolation, max_processes, not no_cgroups)

    def runtime(self) -> SubprocessRuntime:
        from host.sandbox import SubprocessRuntime

        return SubprocessRuntime(
            isolation=self.isolation,
            max_processes=self.max_processes,
            use_cgroups=self.use_cgroups,
        )


def _fail_usage(message: str) -> typer.Exit:
    Console(stderr=True, soft_wrap=True).print(
        f"[bold red]error:[/] {escape(message)}", highlight=False, markup=True
    )
    return typer.Exit(EXIT_USAGE)


def _tools(paths: list[Path]) -> Bindings:
    try:
        return load_bindings(paths)
    except BindingsError as exc:
        raise _fail_usage(str(exc)) from None


def _read_program(program: str) -> str:
    if program == "-":
        return sys.stdin.read()
    path = Path(program)
    if not path.is_file():
        raise _fail_usage(f"program file not found: {program}")
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise _fail_usage(f"cannot read {program}: {exc}") from None


def _ask_handler(decide: bool | None) -> Any:
    """Answers ``ask`` decisions: --yes/--no, else a prompt at a terminal, else no."""
    lock: list[anyio.Lock] = []

    async def handler(call: Any, decision: Any) -> bool:
        if decide is not None:
            return decide
        if not (sys.stdin.isatty() and sys.stderr.isatty()):
            return False
        if not lock:
            lock.append(anyio.Lock())
        prompt = getattr(decision, "prompt", "") or ""
        question = f"{prompt} — allow {call.name}?" if prompt else f"allow {call.name}?"
        async with lock[0]:  # one question at a time, even for parallel calls
            answer = await anyio.to_thread.run_sync(
                lambda: typer.confirm(question, default=False, err=True)
            )
        return bool(answer)

    return handler


def _mcp(values: list[str], config: Path | None) -> list[McpServerSpec]:
    try:
        return mcp_specs(values, config)
    except McpUsageError as exc:
        raise _fail_usage(str(exc)) from None


def _mcp_tools(values: list[str], config: Path | None) -> list[ToolDefinition]:
    """The MCP servers' tool definitions, for the commands that only read schemas."""
    try:
        return mcp_definitions(_mcp(values, config))
    except McpUsageError as exc:
        raise _fail_usage(str(exc)) from None


def _registry(
    bindings: Bindings, decide: bool | None, extra: list[ToolDefinition] | None = None
) -> ToolRegistry:
    registry = ToolRegistry(ToolsConfig(mode="code"), ask_handler=_ask_handler(decide))
    for definition in [*bindings.tools, *(extra or [])]:
        registry.register(definition)
    for setup in bindings.setups:
        try:
            setup(registry)
        except Exception as exc:
            raise _fail_usage(
                f"{SETUP_HOOK}() of a bindings file failed: {type(exc).__name__}: {exc}"
            ) from None
    return registry


class _Status:
    """The live status line: elapsed time, compute used against the budget, calls made."""

    def __init__(self, console: Console, limits: Limits) -> None:
        self.console = console
        self.limits = limits
        self.started = time.monotonic()
        self.stats: RunStats | None = None
        self.calls = 0

    def render(self) -> Text:
        compute = self.stats.compute_ms if self.stats else 0.0
        elapsed = time.monotonic() - self.started
        return Text(
            f"⏱ {elapsed:5.1f}s  compute {compute / 1000:.2f}/{self.limits.compute_ms / 1000:g}s"
            f"  calls {self.calls}",
            style="dim",
        )


def _print_failure(console: Console, result: RunResult) -> None:
    error = result.error
    assert error is not None
    title = error.kind + (f" ({error.budget})" if error.budget else "")
    console.print(f"[bold red]✗ the program failed: {title}[/]", highlight=False)
    console.print(error.message, markup=False, highlight=False)
    if error.exit_status is not None:
        console.print(f"exit status: {error.exit_status}", highlight=False)


@app.command()
def run(
    program: Annotated[str, typer.Argument(help="The program file, or - for standard input.")],
    bindings: BindingsOption = [],  # noqa: B006 - typer reads the default, never mutates it
    compute_ms: Annotated[int, typer.Option(min=1, help="Busy-CPU budget of the run.")] = 60_000,
    wall_ms: Annotated[int, typer.Option(min=1, help="Wall-clock budget of the run.")] = 600_000,
    max_output_bytes: Annotated[int, typer.Option(min=1, help="Cap on logs + result bytes.")] = 64
    * 1024
    * 1024,
    memory_mb: Annotated[int, typer.Option(min=1, help="Heap cap of the program.")] = 512,
    max_parallel_sub_calls: Annotated[
        int, typer.Option(min=1, help="Concurrency-safe calls at once.")
    ] = 10,
    max_tool_calls: Annotated[
        int, typer.Option(min=1, help="Tool calls one run may make.")
    ] = 1_000,
    policy: Annotated[str, typer.Option(help="python or restricted.")] = "python",
    json_output: Annotated[
        bool, typer.Option("--json", help="Print exactly one JSON object.")
    ] = False,
    log: Annotated[
        Path | None, typer.Option(help="Write a JSONL session log (zstd if it ends in .zst).")
    ] = None,
    yes: Annotated[
        bool, typer.Option("--yes", help="Allow every 'ask' without prompting.")
    ] = False,
    no: Annotated[bool, typer.Option("--no", help="Deny every 'ask' without prompting.")] = False,
    check: Annotated[
        bool, typer.Option("--check", help="Type-check the program against the SDK first.")
    ] = False,
    mcp: McpOption = [],  # noqa: B006
    mcp_config: McpConfigOption = None,
    mcp_timeout_ms: McpTimeoutOption = 60_000,
    isolation: IsolationOption = "auto",
    max_processes: MaxProcessesOption = 1024,
    no_cgroups: NoCgroupsOption = False,
) -> None:
    """Run PROGRAM in a fresh child, with the bindings' and MCP servers' tools under tools."""
    if policy not in ("python", "restricted"):
        raise _fail_usage(f"--policy must be python or restricted, not {policy!r}")
    runtime_options = _RuntimeOptions.checked(isolation, max_processes, no_cgroups)
    if yes and no:
        raise _fail_usage("--yes and --no exclude each other")
    source = _read_program(program)
    loaded = _tools(bindings)
    servers = _mcp(mcp, mcp_config)
    limits = Limits(
        compute_ms=compute_ms,
        max_wall_ms=wall_ms,
        max_output_bytes=max_output_bytes,
        max_heap_mb=memory_mb,
        max_parallel_sub_calls=max_parallel_sub_calls,
    )
    decide = True if yes else False if no else None
    try:
        session = SessionLog(log) if log is not None else None
    except OSError as exc:
        raise _fail_usage(f"cannot write the log {log}: {exc}") from None
    try:
        config = CodeModeConfig(
            limits=limits,
            policy="restricted" if policy == "restricted" else "python",
            max_tool_calls=max_tool_calls,
            preflight_check=check,
        )
        plan = _RunPlan(
            source,
            loaded,
            config,
            json_output,
            session,
            decide,
            servers,
            mcp_timeout_ms,
            runtime_options,
        )
        result = anyio.run(_run, plan)
    except (McpUsageError, RuntimeUsageError) as exc:
        raise _fail_usage(str(exc)) from None
    finally:
        if session is not None:
            session.close()
    if json_output:
        sys.stdout.write(json.dumps(result.to_json(), ensure_ascii=False) + "\n")
    raise typer.Exit(EXIT_OK if result.ok else EXIT_FAILED)


@dataclass(frozen=True)
class _RunPlan:
    """Everything ``dsh-code run`` decided before the event loop starts."""

    source: str
    bindings: Bindings
    config: CodeModeConfig
    json_output: bool
    session: SessionLog | None
    decide: bool | None
    mcp: list[McpServerSpec]
    mcp_timeout_ms: int
    runtime: _RuntimeOptions


async def _run(plan: _RunPlan) -> RunResult:
    registry = _registry(plan.bindings, plan.decide)
    async with open_mcp(plan.mcp, registry, plan.mcp_timeout_ms):
        return await _run_program(plan, registry)


async def _run_program(plan: _RunPlan, registry: ToolRegistry) -> RunResult:
    from host.codemode import CodeMode

    source, config, json_output, session = plan.source, plan.config, plan.json_output, plan.session
    out = Console(highlight=False, soft_wrap=True)
    err = Console(stderr=True, highlight=False, soft_wrap=True)
    status = _Status(err, config.limits)
    if session is not None:
        session.write(
            "run/start",
            program=source,
            limits=config.limits,
            tools=[t.name for t in registry.visible()],
        )
        for event in ("tool/code-dispatch-start", "tool/code-dispatch", "result"):
            registry.on(event, _logger(session, event))

    def on_log(line: str) -> None:
        if session is not None:
            session.write("log", line=line)
        if not json_output:
            out.print(line, markup=False)

    def on_call(tool: str, result: ToolResult) -> None:
        status.calls += 1

    def on_progress(stats: RunStats) -> None:
        status.stats = stats

    async with plan.runtime.runtime() as runtime:
        codemode = CodeMode(registry, runtime, config)
        live_wanted = not json_output and err.is_terminal
        with (
            Live(status.render(), console=err, transient=True, auto_refresh=False)
            if live_wanted
            else _Null() as live
        ):

            async def refresh() -> None:
                while True:
                    if live is not None:
                        live.update(status.render(), refresh=True)
                    await anyio.sleep(0.1)

            async with anyio.create_task_group() as tg:
                if live_wanted:
                    tg.start_soon(refresh)
                result = await codemode.run_program(
                    source, on_log=on_log, on_call=on_call, on_progress=on_progress
                )
                tg.cancel_scope.cancel()
    if session is not None:
        session.write("run/end", result=result.to_json(), stats=result.stats)
    if not json_output:
        if result.error is None:
            if result.has_value:
                out.print(json.dumps(result.value, ensure_ascii=False, indent=2), markup=False)
        else:
            _print_failure(err, result)
    return result


class _Null:
    """A stand-in for ``Live`` when there is no terminal."""

    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc_info: object) -> None:
        return None


def _logger(session: SessionLog, event: str) -> Any:
    def write(payload: Any) -> None:
        session.write(event, payload=_jsonable(payload))

    return write


def _jsonable(payload: Any) -> Any:
    to_dict = getattr(payload, "to_dict", None)
    if callable(to_dict):
        return to_dict()
    result = getattr(payload, "result", None)
    call = getattr(payload, "call", None)
    if result is not None and call is not None:
        return {"name": call.name, "call_id": call.call_id, "result": result.to_dict()}
    return payload


@app.command()
def sdk(
    bindings: BindingsOption = [],  # noqa: B006
    lang: Annotated[str, typer.Option(help="python or typescript.")] = "python",
    check: Annotated[
        Path | None, typer.Option("--check", help="Fail (exit 1) if FILE differs from the SDK.")
    ] = None,
    mcp: McpOption = [],  # noqa: B006
    mcp_config: McpConfigOption = None,
) -> None:
    """Print the SDK the model would read for the bindings' and MCP servers' tools."""
    import sdkgen

    if lang not in ("python", "typescript"):
        raise _fail_usage(f"--lang must be python or typescript, not {lang!r}")
    loaded = _tools(bindings)
    registry = _registry(loaded, None, _mcp_tools(mcp, mcp_config))
    manifest = registry.manifest()
    text = sdkgen.python_sdk(manifest) if lang == "python" else sdkgen.typescript_sdk(manifest)
    if check is not None:
        try:
            current = check.read_text(encoding="utf-8")
        except OSError as exc:
            raise _fail_usage(f"cannot read {check}: {exc}") from None
        if current != text:
            Console(stderr=True).print(f"{check} differs from the generated SDK; regenerate it")
            raise typer.Exit(EXIT_FAILED)
        raise typer.Exit(EXIT_OK)
    sys.stdout.write(text)


@app.command("tools")
def tools_command(
    bindings: BindingsOption = [],  # noqa: B006
    format: Annotated[str, typer.Option(help="json, openai or anthropic.")] = "json",
    mcp: McpOption = [],  # noqa: B006
    mcp_config: McpConfigOption = None,
) -> None:
    """Print the native tool schemas (function definitions) of the bindings' tools."""
    from host.tools import anthropic_tools, openai_tools

    if format not in ("json", "openai", "anthropic"):
        raise _fail_usage(f"--format must be json, openai or anthropic, not {format!r}")
    loaded = _tools(bindings)
    schemas = _registry(loaded, None, _mcp_tools(mcp, mcp_config)).schemas()
    out: list[dict[str, Any]]
    if format == "openai":
        out = openai_tools(schemas)
    elif format == "anthropic":
        out = anthropic_tools(schemas)
    else:
        out = [s.to_dict() for s in schemas]
    sys.stdout.write(json.dumps(out, indent=2, ensure_ascii=False) + "\n")


@app.command("check")
def check_command(
    program: Annotated[str, typer.Argument(help="The program file, or - for standard input.")],
    bindings: BindingsOption = [],  # noqa: B006
    mcp: McpOption = [],  # noqa: B006
    mcp_config: McpConfigOption = None,
) -> None:
    """Type-check PROGRAM against the bindings' SDK without running it (exit 1 on errors)."""
    import sdkgen

    source = _read_program(program)
    loaded = _tools(bindings)
    manifest = _registry(loaded, None, _mcp_tools(mcp, mcp_config)).manifest()
    try:
        diagnostics = sdkgen.check_program(source, manifest)
    except sdkgen.SdkgenError as exc:
        raise _fail_usage(str(exc)) from None
    if diagnostics:
        sys.stdout.write(sdkgen.render_diagnostics(diagnostics) + "\n")
    errors = [d for d in diagnostics if d.severity == "error"]
    raise typer.Exit(EXIT_FAILED if errors else EXIT_OK)


@app.command("mcp")
def mcp_command(
    bindings: BindingsOption = [],  # noqa: B006
    mcp: McpOption = [],  # noqa: B006
    mcp_config: McpConfigOption = None,
    mcp_timeout_ms: McpTimeoutOption = 60_000,
    http: Annotated[
        int | None,
        typer.Option(
            "--http",
            min=0,
            max=65535,
            help="Serve streamable HTTP on 127.0.0.1:PORT (path /mcp) instead of stdio.",
        ),
    ] = None,
    compute_ms: Annotated[int, typer.Option(min=1, help="Busy-CPU budget of a run.")] = 60_000,
    wall_ms: Annotated[int, typer.Option(min=1, help="Wall-clock budget of a run.")] = 600_000,
    memory_mb: Annotated[int, typer.Option(min=1, help="Heap cap of a program.")] = 512,
    max_tool_calls: Annotated[
        int, typer.Option(min=1, help="Tool calls one run may make.")
    ] = 1_000,
    policy: Annotated[str, typer.Option(help="python or restricted.")] = "python",
    yes: Annotated[
        bool,
        typer.Option("--yes", help="Allow every 'ask' (otherwise the MCP client is asked)."),
    ] = False,
    isolation: IsolationOption = "auto",
    max_processes: MaxProcessesOption = 1024,
    no_cgroups: NoCgroupsOption = False,
) -> None:
    """Serve code mode over MCP: run_code (its description carries the SDK) and schema look-ups."""
    import contextlib

    if policy not in ("python", "restricted"):
        raise _fail_usage(f"--policy must be python or restricted, not {policy!r}")
    if not bindings and not mcp and mcp_config is None:
        raise _fail_usage("dsh-code mcp needs tools: --bindings FILE, --mcp or --mcp-config")
    runtime_options = _RuntimeOptions.checked(isolation, max_processes, no_cgroups)
    from host.mcp import McpUnavailableError, require_mcp

    try:
        require_mcp()
    except McpUnavailableError as exc:
        raise _fail_usage(str(exc)) from None
    with contextlib.redirect_stdout(sys.stderr):  # stdout is the MCP channel
        loaded = _tools(bindings)
    servers = _mcp(mcp, mcp_config)
    config = CodeModeConfig(
        limits=Limits(compute_ms=compute_ms, max_wall_ms=wall_ms, max_heap_mb=memory_mb),
        policy="restricted" if policy == "restricted" else "python",
        max_tool_calls=max_tool_calls,
    )

    async def serve_all() -> None:
        from host.codemode import CodeMode
        from host.mcp import McpServeConfig, serve

        with contextlib.redirect_stdout(sys.stderr):  # setup_registry hooks may print
            registry = _registry(loaded, yes)
        if not yes:  # stdin is the MCP channel: an `ask` goes to the client, by elicitation
            from host.mcp import elicitation_ask_handler

            registry.ask_handler = elicitation_ask_handler()
        async with (
            open_mcp(servers, registry, mcp_timeout_ms),
            runtime_options.runtime() as runtime,
        ):
            codemode = CodeMode(registry, runtime, config)
            await serve(codemode, McpServeConfig(http_port=http))

    try:
        anyio.run(serve_all)
    except (McpUsageError, RuntimeUsageError, OSError) as exc:
        raise _fail_usage(str(exc)) from None
    except KeyboardInterrupt:
        raise typer.Exit(EXIT_OK) from None


Mode = Literal["python", "typescript"]
