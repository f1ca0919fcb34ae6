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

from host.cli._check_command import check_command
from host.cli._errors import EXIT_FAILED, EXIT_OK, EXIT_USAGE, UsageFailure
from host.cli._mcp import (
    MCP_START_TIMEOUT_MS,
    McpConfigOption,
    McpOption,
    McpStartTimeoutOption,
    McpTimeoutOption,
)
from host.cli._options import (
    DEFAULTS,
    MAX_STATE_BYTES,
    MCP_WALL_MS,
    MODEL_OUTPUT_BYTES,
    BindingsOption,
    CallStyleOption,
    ComputeMsOption,
    IsolationOption,
    LangOption,
    MaxHeapMbOption,
    MaxModelOutputBytesOption,
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
    report_usage,
    reset_json,
    stdout_to_stderr,
    write_result,
)
from host.cli._repl_command import repl
from host.cli._resume import resume
from host.cli._session_log import LogFileError, SessionLog
from host.cli._setup import (
    CALL_STYLES,
    POLICIES,
    RuntimeOptions,
    check_choice,
    check_typescript_flags,
    codemode_config_of,
    language_of,
    load_tools,
    make_registry,
    mcp_servers,
    mcp_tools,
    read_program,
    unwrap_usage,
)
from host.cli._signals import STOPPER, current_stopper

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
    mcp_start_timeout_ms: McpStartTimeoutOption = MCP_START_TIMEOUT_MS,
    isolation: IsolationOption = "auto",
    max_processes: MaxProcessesOption = 1024,
    no_cgroups: NoCgroupsOption = False,
    call_style: CallStyleOption = "async",
    preload: PreloadOption = [],  # noqa: B006
    ray: RayOption = None,
    session_file: SessionOption = None,
    max_state_bytes: MaxStateBytesOption = MAX_STATE_BYTES,
    journal: Annotated[
        Path | None,
        typer.Option(
            metavar="FILE",
            help="Write the run's journal, mode 0600 (a paused run continues with resume FILE).",
        ),
    ] = None,
    full_logs: Annotated[
        bool,
        typer.Option("--full-logs", help="At a terminal, every log line (else a head and a tail)."),
    ] = False,
    lang: LangOption = None,
    otel: OtelOption = False,
    otel_capture: OtelCaptureOption = [],  # noqa: B006
) -> None:
    """Run PROGRAM in a fresh child, with the bindings' and MCP servers' tools under tools."""
    from host.cli._journal_file import RunSettings
    from host.cli._launch import launch
    from host.cli._resume import checked_journal
    from host.cli._run import RunPlan, load_state

    reset_json()
    stopper = current_stopper()
    stopper.settled = False  # a new command (the same process runs several under a test runner)
    check_choice("--policy", policy, POLICIES)
    check_choice("--call-style", call_style, CALL_STYLES)
    language = language_of(lang, program)
    check_typescript_flags(
        language, policy=policy, call_style=call_style, session=session_file is not None
    )
    if yes and no:
        raise UsageFailure("--yes and --no exclude each other")
    if session_file is not None and ray is not None:
        raise UsageFailure("--session needs a local runtime: a --ray cluster keeps no sessions")
    state = load_state(session_file, max_state_bytes)  # None without --session
    settings = None
    if journal is not None and language == "typescript":
        raise UsageFailure("--journal is for Python programs: a TypeScript run cannot resume yet")
    if journal is not None:
        checked_journal(journal)
        settings = RunSettings(
            bindings=[str(path.resolve()) for path in bindings],
            mcp=list(mcp),
            mcp_config=str(mcp_config.resolve()) if mcp_config is not None else None,
            mcp_timeout_ms=mcp_timeout_ms,
            compute_ms=compute_ms,
            wall_ms=wall_ms,
            max_output_bytes=max_output_bytes,
            max_heap_mb=max_heap_mb,
            max_parallel_sub_calls=max_parallel_sub_calls,
            max_tool_calls=max_tool_calls,
            policy=policy,
            call_style=call_style,
            isolation=isolation,
            max_processes=max_processes,
            no_cgroups=no_cgroups,
            preload=list(preload),
            ray=ray,
            session=str(session_file.resolve()) if session_file is not None else None,
            max_state_bytes=max_state_bytes,
        )
    runtime_options = RuntimeOptions.checked(
        isolation, max_processes, no_cgroups, preload, ray, language
    )
    telemetry = otel_plan(otel, otel_capture)
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
        mcp_start_timeout_ms,
        full_logs=full_logs,
        journal=journal,
        settings=settings,
    )
    launch(plan, json_output=json_output, session_file=session_file, telemetry=telemetry)


app.command("repl")(_usage_errors(repl))
app.command("resume")(_usage_errors(resume))


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
    mcp_start_timeout_ms: McpStartTimeoutOption = MCP_START_TIMEOUT_MS,
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
        registry = make_registry(loaded, None, mcp_tools(mcp, mcp_config, mcp_start_timeout_ms))
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
    mcp_start_timeout_ms: McpStartTimeoutOption = MCP_START_TIMEOUT_MS,
) -> None:
    """Print the native tool schemas (function definitions) of the bindings' tools."""
    from host.tools import anthropic_tools, openai_tools

    check_choice("--format", format, ("json", "openai", "anthropic"))
    with stdout_to_stderr():
        loaded = load_tools(bindings)
        schemas = make_registry(
            loaded, None, mcp_tools(mcp, mcp_config, mcp_start_timeout_ms)
        ).schemas()
    out: list[dict[str, Any]]
    if format == "openai":
        out = openai_tools(schemas)
    elif format == "anthropic":
        out = anthropic_tools(schemas)
    else:
        out = [s.to_dict() for s in schemas]
    write_result(json.dumps(out, indent=2, ensure_ascii=False) + "\n")


app.command("check")(_usage_errors(check_command))


@app.command("mcp")
@_usage_errors
def mcp_command(
    bindings: BindingsOption = [],  # noqa: B006
    mcp: McpOption = [],  # noqa: B006
    mcp_config: McpConfigOption = None,
    mcp_timeout_ms: McpTimeoutOption = 60_000,
    mcp_start_timeout_ms: McpStartTimeoutOption = MCP_START_TIMEOUT_MS,
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
            help="The bearer token --http requires; readable by other processes in the command "
            "line: prefer --token-file or DSH_CODE_MCP_TOKEN (default: generated and printed).",
            show_default=False,
        ),
    ] = None,
    token_file: Annotated[
        Path | None,
        typer.Option(
            "--token-file",
            metavar="FILE",
            help="Read the bearer token --http requires from FILE (its first line).",
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
    max_model_output_bytes: MaxModelOutputBytesOption = MODEL_OUTPUT_BYTES,
    lang: LangOption = None,
    otel: OtelOption = False,
    otel_capture: OtelCaptureOption = [],  # noqa: B006
) -> None:
    """Serve code mode over MCP: run_code (its description carries the SDK) and schema look-ups."""
    from host.cli._serve import ServePlan, serve_mcp
    from host.cli._token import serve_auth

    auth = serve_auth(http, token, token_file, no_auth)  # first: the token leaves /proc
    check_choice("--policy", policy, POLICIES)
    check_choice("--call-style", call_style, CALL_STYLES)
    language = language_of(lang)
    check_typescript_flags(language, policy=policy, call_style=call_style)
    if not bindings and not mcp and mcp_config is None:
        raise UsageFailure("dsh-code mcp needs tools: --bindings FILE, --mcp or --mcp-config")
    from host.mcp import McpUnavailableError, require_mcp

    try:
        require_mcp()
    except McpUnavailableError as exc:
        raise UsageFailure(str(exc)) from None
    runtime_options = RuntimeOptions.checked(
        isolation, max_processes, no_cgroups, preload, ray, language
    )
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
        max_model_output_bytes=max_model_output_bytes,
    )
    plan = ServePlan(
        bindings=loaded,
        servers=mcp_servers(mcp, mcp_config),
        mcp_timeout_ms=mcp_timeout_ms,
        mcp_start_timeout_ms=mcp_start_timeout_ms,
        config=config,
        yes=yes,
        http_port=http,
        token=auth.token,
        token_generated=auth.generated,
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
