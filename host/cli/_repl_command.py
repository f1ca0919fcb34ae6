"""The ``dsh-code repl`` command: its options, checked, and the REPL run to its end."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from host.cli._errors import UsageFailure
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
    SessionOption,
    WallMsOption,
)
from host.cli._output import stdout_to_stderr
from host.cli._setup import (
    CALL_STYLES,
    POLICIES,
    RuntimeOptions,
    check_choice,
    codemode_config_of,
    load_tools,
    mcp_servers,
    unwrap_usage,
)
from host.cli._signals import current_stopper

__all__ = ("repl",)

#: Where the REPL keeps its input history (as Python's REPL keeps ~/.python_history).
HISTORY_FILE = "~/.dsh_code_history"


def repl(
    bindings: BindingsOption = [],  # noqa: B006 - typer reads the default, never mutates it
    mcp: McpOption = [],  # noqa: B006
    mcp_config: McpConfigOption = None,
    mcp_timeout_ms: McpTimeoutOption = 60_000,
    mcp_start_timeout_ms: McpStartTimeoutOption = MCP_START_TIMEOUT_MS,
    session_file: SessionOption = None,
    max_state_bytes: MaxStateBytesOption = MAX_STATE_BYTES,
    call_style: CallStyleOption = "async",
    preload: PreloadOption = [],  # noqa: B006
    compute_ms: ComputeMsOption = DEFAULTS.compute_ms,
    wall_ms: WallMsOption = DEFAULTS.max_wall_ms,
    max_output_bytes: MaxOutputBytesOption = DEFAULTS.max_output_bytes,
    max_heap_mb: MaxHeapMbOption = DEFAULTS.max_heap_mb,
    max_parallel_sub_calls: MaxParallelSubCallsOption = DEFAULTS.max_parallel_sub_calls,
    max_tool_calls: MaxToolCallsOption = 1_000,
    policy: PolicyOption = "python",
    yes: Annotated[
        bool, typer.Option("--yes", help="Allow every 'ask' without prompting.")
    ] = False,
    no: Annotated[bool, typer.Option("--no", help="Deny every 'ask' without prompting.")] = False,
    isolation: IsolationOption = "auto",
    max_processes: MaxProcessesOption = 1024,
    no_cgroups: NoCgroupsOption = False,
    history: Annotated[
        Path | None,
        typer.Option(
            metavar="FILE",
            help=f"Where the input history is kept (default: {HISTORY_FILE}).",
            show_default=False,
        ),
    ] = None,
    no_history: Annotated[
        bool, typer.Option("--no-history", help="Keep no input history in a file.")
    ] = False,
) -> None:
    """An interactive prompt: each input runs in a fresh child, its variables kept for the next."""
    from host.cli._repl import run_repl
    from host.cli._repl_engine import ReplPlan
    from host.cli._run import load_state

    check_choice("--policy", policy, POLICIES)
    check_choice("--call-style", call_style, CALL_STYLES)
    if yes and no:
        raise UsageFailure("--yes and --no exclude each other")
    if history is not None and no_history:
        raise UsageFailure("--history and --no-history exclude each other")
    loaded_state = load_state(session_file, max_state_bytes)
    if loaded_state is not None and loaded_state.too_big() is not None:
        raise UsageFailure(
            f"the session file {session_file} is over --max-state-bytes ({max_state_bytes})"
        )
    runtime_options = RuntimeOptions.checked(isolation, max_processes, no_cgroups, preload)
    with stdout_to_stderr():  # the bindings files' prints
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
    plan = ReplPlan(
        bindings=loaded,
        config=config,
        servers=mcp_servers(mcp, mcp_config),
        mcp_timeout_ms=mcp_timeout_ms,
        mcp_start_timeout_ms=mcp_start_timeout_ms,
        runtime=runtime_options,
        decide=True if yes else False if no else None,
        state=loaded_state.state if loaded_state is not None else None,
        max_state_bytes=max_state_bytes,
        session_file=session_file,
    )
    where = None if no_history else (history or Path(HISTORY_FILE).expanduser())
    stopper = current_stopper()
    try:
        with stdout_to_stderr():
            code = run_repl(plan, stopper, where)
    except BaseException as exc:
        failure = unwrap_usage(exc)
        if failure is None:
            raise
        raise failure from None
    raise typer.Exit(code)
