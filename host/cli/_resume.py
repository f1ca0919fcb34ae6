"""``dsh-code resume FILE [--yes|--no]``: continue a run from the journal ``run --journal``
wrote, in this process or a later one. The program is replayed in a fresh child (no call it
made before runs again), the calls it waits on run (``--yes``) or are refused (``--no``;
with neither they are asked again), and the journal file is written anew."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from host.cli._errors import UsageFailure
from host.cli._journal_file import JournalFileError, check_journal_file, read_journal_file
from host.cli._output import reset_json, stdout_to_stderr
from host.cli._setup import RuntimeOptions, codemode_config_of, load_tools, mcp_servers
from runtime import Decision

__all__ = ("checked_journal", "resume")


def checked_journal(path: Path) -> None:
    """``--journal FILE``: a usage error now if it could not be written later."""
    try:
        check_journal_file(path)
    except JournalFileError as exc:
        raise UsageFailure(str(exc)) from None


def resume(
    file: Annotated[
        Path, typer.Argument(metavar="FILE", help="The journal file `run --journal` wrote.")
    ],
    yes: Annotated[bool, typer.Option("--yes", help="Run the calls the program waits on.")] = False,
    no: Annotated[
        bool, typer.Option("--no", help="Refuse them (the program gets ToolCallError DENIED).")
    ] = False,
    json_output: Annotated[
        bool, typer.Option("--json", help="Print exactly one JSON object on stdout.")
    ] = False,
) -> None:
    """Continue a paused run from its journal FILE: no call it made before runs again."""
    from host.cli._launch import launch
    from host.cli._run import RunPlan, load_state

    reset_json()
    if yes and no:
        raise UsageFailure("--yes and --no exclude each other")
    try:
        settings, journal = read_journal_file(file)
    except JournalFileError as exc:
        raise UsageFailure(str(exc)) from None
    decisions: dict[str, Decision] = {}
    if yes or no:
        verdict: Decision = "allow" if yes else "deny"
        decisions = {held.call_id: verdict for held in journal.pending}
    session_file = Path(settings.session) if settings.session is not None else None
    state = load_state(session_file, settings.max_state_bytes)
    runtime = RuntimeOptions.checked(
        settings.isolation,
        settings.max_processes,
        settings.no_cgroups,
        settings.preload,
        settings.ray,
        hash_seed=journal.seeds.hash or None,  # the children the journal was recorded in
    )
    with stdout_to_stderr():  # the bindings files' prints
        loaded = load_tools([Path(path) for path in settings.bindings])
    mcp_config = Path(settings.mcp_config) if settings.mcp_config is not None else None
    config = codemode_config_of(
        settings.compute_ms,
        settings.wall_ms,
        settings.max_output_bytes,
        settings.max_heap_mb,
        settings.max_parallel_sub_calls,
        policy=settings.policy,
        call_style=settings.call_style,
        max_tool_calls=settings.max_tool_calls,
    )
    plan = RunPlan(
        journal.program,
        loaded,
        config,
        json_output,
        None,
        None,
        mcp_servers(settings.mcp, mcp_config),
        settings.mcp_timeout_ms,
        runtime,
        state,
        journal=file,
        settings=settings,
        resume=(journal, decisions),
    )
    launch(plan, json_output=json_output, session_file=session_file)
