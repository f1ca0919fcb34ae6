"""The ``dsh-code`` commands: run, repl, sdk, tools, check, mcp."""

from __future__ import annotations

import functools
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import anyio
import typer

from host.cli._errors import EXIT_FAILED, EXIT_OK, EXIT_USAGE, UsageFailure
from host.cli._mcp import McpConfigOption, McpOption, McpTimeoutOption
from host.cli._options import (
    DEFAULTS,
    MAX_STATE_BYTES,
    MCP_WALL_MS,
    BindingsOption,
    CallStyleOption,
    ComputeMsOption,
    IsolationOption,
    MaxHeapMbOption,
    MaxOutputBytesOption,
    MaxParallelSubCallsOption,
    MaxProcessesOption,
    MaxStateBytesOption,
    MaxToolCallsOption,
    NoCgroupsOption,
    PolicyOption,
    PreloadOption,
    RayOption,
    SessionOption,
    WallMsOption,
)
from host.cli._otel import OtelCaptureOption, OtelOption, exporting, otel_plan
from host.cli._output import (
    is_terminal,
    report_usage,
    reset_json,
    result_stream,
    stdout_to_stderr,
    write_json,
    write_result,
)
from host.cli._repl_command import repl
from host.cli._session_log import LogFileError, SessionLog
from host.cli._setup import (
    CALL_STYLES,
    POLICIES,
    RuntimeOptions,
    check_choice,
    codemode_config_of,
    load_tools,
    make_registry,
    mcp_servers,
    mcp_tools,
    read_program,
    unwrap_usage,
)
from host.cli._signals import STOPPER, current_stopper, exit_code_for

__all__ = ("STOPPER", "app")


def _version(value: bool) -> None:
    if value:
        from importlib.metadata import PackageNotFoundError, version

        try:
            number = version("dsh-code")
        except PackageNotFoundError:
            number = "unknown (not installed)"
        write_result(f"dsh-code {number}\n")
        raise typer.Exit(EXIT_OK)


app = typer.Typer(
    name="dsh-code",
    help="Run Python programs that call tools, each in a fresh contained child process.",
    add_completion=True,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
)


@app.callback()
def _main(
    version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_version, is_eager=True, help="Print the version and exit."
        ),
    ] = False,
) -> None:
    """Run Python programs that call tools, each in a fresh contained child process."""


def _usage_errors(command: Callable[..., None]) -> Callable[..., None]:
    """A command whose ``UsageFailure`` is reported (and, for ``--json``, as the object): exit 2."""

    @functools.wraps(command)
    def checked(*args: Any, **kwargs: Any) -> None:
        try:
            command(*args, **kwargs)
        except UsageFailure as exc:
            report_usage(exc.message, json_output=bool(kwargs.get("json_output")))
            raise typer.Exit(EXIT_USAGE) from None

    return checked


@app.command()
@_usage_errors
def run(
    program: Annotated[
        str, typer.Argument(metavar="PROGRAM", help="The program file, or - for standard input.")
    ],
    bindings: BindingsOption = [],  # noqa: B006 - typer reads the default, never mutates it
    compute_ms: ComputeMsOption = DEFAULTS.compute_ms,
    wall_ms: WallMsOption = DEFAULTS.max_wall_ms,
    max_output_bytes: MaxOutputBytesOption = DEFAULTS.max_output_bytes,
    max_heap_mb: MaxHeapMbOption = DEFAULTS.max_heap_mb,
    max_parallel_sub_calls: MaxParallelSubCallsOption = DEFAULTS.max_parallel_sub_calls,
    max_tool_calls: MaxToolCallsOption = 1_000,
    policy: PolicyOption = "python",
    json_output: Annotated[
        bool, typer.Option("--json", help="Print exactly one JSON object on stdout.")
    ] = False,
    log: Annotated[
        Path | None,
        typer.Option(
            metavar="FILE", help="Write a JSONL session log, mode 0600 (zstd if it ends in .zst)."
        ),
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
    call_style: CallStyleOption = "async",
    preload: PreloadOption = [],  # noqa: B006
    ray: RayOption = None,
    session_file: SessionOption = None,
    max_state_bytes: MaxStateBytesOption = MAX_STATE_BYTES,
    otel: OtelOption = False,
    otel_capture: OtelCaptureOption = [],  # noqa: B006
) -> None:
    """Run PROGRAM in a fresh child, with the bindings' and MCP servers' tools under tools."""
    from host.cli._run import (
        RunOutcome,
        RunPlan,
        aborted_json,
        execute,
        load_state,
        save_state,
        state_hint,
    )

    reset_json()
    check_choice("--policy", policy, POLICIES)
    check_choice("--call-style", call_style, CALL_STYLES)
    if yes and no:
        raise UsageFailure("--yes and --no exclude each other")
    if session_file is not None and ray is not None:
        raise UsageFailure("--session needs a local runtime: a --ray cluster keeps no sessions")
    state = load_state(session_file, max_state_bytes)  # None without --session
    runtime_options = RuntimeOptions.checked(isolation, max_processes, no_cgroups, preload, ray)
    telemetry = otel_plan(otel, otel_capture)
    stopper = current_stopper()
    with stdout_to_stderr():  # the bindings files' prints
        source = read_program(program)
        loaded = load_tools(bindings)
    servers = mcp_servers(mcp, mcp_config)
    decide = True if yes else False if no else None
    try:
        session = SessionLog(log) if log is not None else None
    except LogFileError as exc:
        raise UsageFailure(str(exc)) from None
    config = codemode_config_of(
        compute_ms,
        wall_ms,
        max_output_bytes,
        max_heap_mb,
        max_parallel_sub_calls,
        policy=policy,
        call_style=call_style,
        max_tool_calls=max_tool_calls,
        preflight_check=check,
    )
    plan = RunPlan(
        source,
        loaded,
        config,
        json_output,
        session,
        decide,
        servers,
        mcp_timeout_ms,
        runtime_options,
        state,
    )
    outcome = RunOutcome()

    def emit(obj: dict[str, Any]) -> None:
        if json_output:
            write_json(obj)

    stopper.on_hard_exit = lambda signum: emit(aborted_json(outcome.logs, signum))
    failure: UsageFailure | None = None
    try:
        with stdout_to_stderr(), exporting(telemetry), stopper.event_loop():
            anyio.run(execute, plan, stopper, outcome)
    except BaseException as exc:
        failure = unwrap_usage(exc)
        if failure is None:
            raise
    finally:
        stopper.on_hard_exit = None
        log_error = session.close() if session is not None else None
    if failure is not None:
        raise failure
    if log_error is not None:
        sys.stderr.write(f"dsh-code: {log_error}\n")
    save_error = save_state(state, outcome)
    if save_error is not None:
        sys.stderr.write(f"dsh-code: {save_error}\n")
    hint = state_hint(outcome.result.error if outcome.result else None, session_file)
    if hint is not None and not json_output:
        sys.stderr.write(hint + "\n")
    _report(outcome, json_output, log_error, emit, save_error)


def _report(
    outcome: Any, json_output: bool, log_error: str | None, emit: Any, save_error: str | None
) -> None:
    from host.cli._run import aborted_json, render_dropped, render_failure, render_value

    result, signum = outcome.result, outcome.signum
    if result is None:
        assert signum is not None  # the loop ends without a result only when a signal stopped it
        sys.stderr.write(f"dsh-code: interrupted by {_name(signum)} before the run started\n")
        emit(aborted_json(outcome.logs, signum, started=False))
        raise typer.Exit(exit_code_for(signum))
    if signum is not None and result.error is not None and result.error.kind == "aborted":
        import msgspec

        reason = f"interrupted by {_name(signum)}"
        result = msgspec.structs.replace(
            result, error=msgspec.structs.replace(result.error, message=reason)
        )
    if json_output:
        obj = result.to_json()
        if log_error is not None:
            obj["log_error"] = log_error
        if save_error is not None:
            obj["session_error"] = save_error
        emit(obj)
    else:
        terminal = is_terminal(result_stream())
        if result.error is None:
            if result.has_value:
                write_result(render_value(result.value, terminal=terminal) + "\n")
            if result.state_dropped:
                sys.stderr.write(render_dropped(result.state_dropped) + "\n")
        else:
            sys.stderr.write(render_failure(result.error, terminal=is_terminal(sys.stderr)) + "\n")
    if signum is not None:
        raise typer.Exit(exit_code_for(signum))
    raise typer.Exit(EXIT_OK if result.ok and save_error is None else EXIT_FAILED)


def _name(signum: int) -> str:
    from host.cli._signals import signal_name

    return signal_name(signum)


app.command("repl")(_usage_errors(repl))


@app.command()
@_usage_errors
def sdk(
    bindings: BindingsOption = [],  # noqa: B006
    lang: Annotated[
        str, typer.Option(metavar="python|typescript", help="The SDK's language.")
    ] = "python",
    check: Annotated[
        Path | None,
        typer.Option("--check", metavar="FILE", help="Fail (exit 1) if FILE differs from the SDK."),
    ] = None,
    mcp: McpOption = [],  # noqa: B006
    mcp_config: McpConfigOption = None,
    call_style: CallStyleOption = "async",
) -> None:
    """Print the SDK the model would read for the bindings' and MCP servers' tools."""
    import sdkgen

    check_choice("--lang", lang, ("python", "typescript"))
    check_choice("--call-style", call_style, CALL_STYLES)
    if lang == "typescript" and call_style == "sync":
        raise UsageFailure(
            "--call-style sync is for --lang python (TypeScript calls return promises)"
        )
    with stdout_to_stderr():
        loaded = load_tools(bindings)
        registry = make_registry(loaded, None, mcp_tools(mcp, mcp_config))
    manifest = registry.manifest()
    if lang == "python":
        text = sdkgen.python_sdk(manifest, call_style="sync" if call_style == "sync" else "async")
    else:
        text = sdkgen.typescript_sdk(manifest)
    if check is not None:
        try:
            current = check.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise UsageFailure(f"cannot read {check}: {exc}") from None
        if current != text:
            sys.stderr.write(f"{check} differs from the generated SDK; regenerate it\n")
            raise typer.Exit(EXIT_FAILED)
        raise typer.Exit(EXIT_OK)
    write_result(text)


@app.command("tools")
@_usage_errors
def tools_command(
    bindings: BindingsOption = [],  # noqa: B006
    format: Annotated[
        str, typer.Option(metavar="json|openai|anthropic", help="The schemas' format.")
    ] = "json",
    mcp: McpOption = [],  # noqa: B006
    mcp_config: McpConfigOption = None,
) -> None:
    """Print the native tool schemas (function definitions) of the bindings' tools."""
    from host.tools import anthropic_tools, openai_tools

    check_choice("--format", format, ("json", "openai", "anthropic"))
    with stdout_to_stderr():
        loaded = load_tools(bindings)
        schemas = make_registry(loaded, None, mcp_tools(mcp, mcp_config)).schemas()
    out: list[dict[str, Any]]
    if format == "openai":
        out = openai_tools(schemas)
    elif format == "anthropic":
        out = anthropic_tools(schemas)
    else:
        out = [s.to_dict() for s in schemas]
    write_result(json.dumps(out, indent=2, ensure_ascii=False) + "\n")


@app.command("check")
@_usage_errors
def check_command(
    program: Annotated[
        str, typer.Argument(metavar="PROGRAM", help="The program file, or - for standard input.")
    ],
    bindings: BindingsOption = [],  # noqa: B006
    mcp: McpOption = [],  # noqa: B006
    mcp_config: McpConfigOption = None,
    call_style: CallStyleOption = "async",
) -> None:
    """Type-check PROGRAM against the bindings' SDK without running it (exit 1 on errors)."""
    import sdkgen

    check_choice("--call-style", call_style, CALL_STYLES)
    with stdout_to_stderr():
        source = read_program(program)
        loaded = load_tools(bindings)
        manifest = make_registry(loaded, None, mcp_tools(mcp, mcp_config)).manifest()
    try:
        diagnostics = sdkgen.check_program(source, manifest, call_style=call_style)
    except sdkgen.SdkgenError as exc:
        raise UsageFailure(str(exc)) from None
    if diagnostics:
        write_result(sdkgen.render_diagnostics(diagnostics) + "\n")
    errors = [d for d in diagnostics if d.severity == "error"]
    raise typer.Exit(EXIT_FAILED if errors else EXIT_OK)


@app.command("mcp")
@_usage_errors
def mcp_command(
    bindings: BindingsOption = [],  # noqa: B006
    mcp: McpOption = [],  # noqa: B006
    mcp_config: McpConfigOption = None,
    mcp_timeout_ms: McpTimeoutOption = 60_000,
    http: Annotated[
        int | None,
        typer.Option(
            "--http",
            metavar="PORT",
            min=0,
            max=65535,
            help="Serve streamable HTTP on 127.0.0.1:PORT (path /mcp) instead of stdio.",
        ),
    ] = None,
    token: Annotated[
        str | None,
        typer.Option(
            "--token",
            metavar="TOKEN",
            envvar="DSH_CODE_MCP_TOKEN",
            help="The bearer token --http requires (default: generated and printed).",
            show_default=False,
        ),
    ] = None,
    no_auth: Annotated[
        bool, typer.Option("--no-auth", help="Serve --http without a bearer token.")
    ] = False,
    compute_ms: ComputeMsOption = DEFAULTS.compute_ms,
    wall_ms: WallMsOption = MCP_WALL_MS,
    max_output_bytes: MaxOutputBytesOption = DEFAULTS.max_output_bytes,
    max_heap_mb: MaxHeapMbOption = DEFAULTS.max_heap_mb,
    max_parallel_sub_calls: MaxParallelSubCallsOption = DEFAULTS.max_parallel_sub_calls,
    max_tool_calls: MaxToolCallsOption = 1_000,
    policy: PolicyOption = "python",
    yes: Annotated[
        bool,
        typer.Option("--yes", help="Allow every 'ask' (otherwise the MCP client is asked)."),
    ] = False,
    isolation: IsolationOption = "auto",
    max_processes: MaxProcessesOption = 1024,
    no_cgroups: NoCgroupsOption = False,
    call_style: CallStyleOption = "async",
    preload: PreloadOption = [],  # noqa: B006
    ray: RayOption = None,
    max_state_bytes: MaxStateBytesOption = MAX_STATE_BYTES,
    otel: OtelOption = False,
    otel_capture: OtelCaptureOption = [],  # noqa: B006
) -> None:
    """Serve code mode over MCP: run_code (its description carries the SDK) and schema look-ups."""
    from host.cli._serve import ServePlan, serve_mcp

    check_choice("--policy", policy, POLICIES)
    check_choice("--call-style", call_style, CALL_STYLES)
    if not bindings and not mcp and mcp_config is None:
        raise UsageFailure("dsh-code mcp needs tools: --bindings FILE, --mcp or --mcp-config")
    if http is not None and token is not None and not no_auth and len(token) < 16:
        raise UsageFailure("--token must be at least 16 characters")
    from host.mcp import McpUnavailableError, require_mcp

    try:
        require_mcp()
    except McpUnavailableError as exc:
        raise UsageFailure(str(exc)) from None
    runtime_options = RuntimeOptions.checked(isolation, max_processes, no_cgroups, preload, ray)
    telemetry = otel_plan(otel, otel_capture)
    with stdout_to_stderr():  # stdout is the MCP channel
        loaded = load_tools(bindings)
    config = codemode_config_of(
        compute_ms,
        wall_ms,
        max_output_bytes,
        max_heap_mb,
        max_parallel_sub_calls,
        policy=policy,
        call_style=call_style,
        max_tool_calls=max_tool_calls,
    )
    plan = ServePlan(
        bindings=loaded,
        servers=mcp_servers(mcp, mcp_config),
        mcp_timeout_ms=mcp_timeout_ms,
        config=config,
        yes=yes,
        http_port=http,
        token=None if no_auth or http is None else (token or _new_token()),
        token_generated=http is not None and not no_auth and token is None,
        runtime=runtime_options,
        max_state_bytes=max_state_bytes,
    )
    stopper = current_stopper()
    try:
        with stdout_to_stderr(), exporting(telemetry), stopper.event_loop():
            anyio.run(serve_mcp, plan, stopper)
    except BaseException as exc:
        failure = unwrap_usage(exc)
        if failure is None:
            raise
        raise failure from None
    raise typer.Exit(EXIT_OK)


def _new_token() -> str:
    import secrets

    return secrets.token_urlsafe(24)
