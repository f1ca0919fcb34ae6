"""What ``run`` and ``resume`` do once their plan is made: the event loop, then what the run
leaves (the session's state, the journal file), then the report and the exit code."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, NoReturn

import anyio
import msgspec
import typer

from host.cli._errors import EXIT_FAILED, EXIT_OK, EXIT_PAUSED, UsageFailure
from host.cli._otel import OtelPlan, exporting
from host.cli._output import is_terminal, result_stream, stdout_to_stderr, write_json, write_result
from host.cli._run import (
    RunOutcome,
    RunPlan,
    aborted_json,
    execute,
    render_dropped,
    render_failure,
    render_value,
    save_state,
    state_hint,
)
from host.cli._setup import unwrap_usage
from host.cli._signals import current_stopper, exit_code_for, signal_name
from runtime import RunResult

__all__ = ("launch", "render_paused")

_ARGS_SHOWN = 300


def launch(
    plan: RunPlan,
    *,
    json_output: bool,
    session_file: Path | None,
    telemetry: OtelPlan | None = None,
) -> NoReturn:
    """Run ``plan`` (exporting its spans as ``telemetry`` says); keep its state and journal;
    report; exit with the run's code."""
    stopper = current_stopper()
    outcome = RunOutcome()

    def emit(obj: dict[str, Any]) -> None:
        if json_output:
            write_json(obj)

    stopper.on_hard_exit = lambda signum: emit(aborted_json(outcome.logs, signum))
    failure: UsageFailure | None = None
    session = plan.session
    try:
        plan_otel = telemetry or OtelPlan(export=False, required=False, capture=frozenset())
        with stdout_to_stderr(), exporting(plan_otel), stopper.event_loop():
            anyio.run(execute, plan, stopper, outcome)
    except BaseException as exc:
        failure = unwrap_usage(exc)
        if failure is None:
            raise
    finally:
        stopper.on_hard_exit = None
        stopper.settle()  # what follows only reports the run
        log_error = session.close() if session is not None else None
    if failure is not None:
        raise failure
    if log_error is not None:
        sys.stderr.write(f"dsh-code: {log_error}\n")
    save_error = save_state(plan.state, outcome)
    if save_error is not None:
        sys.stderr.write(f"dsh-code: {save_error}\n")
    hint = state_hint(outcome.result.error if outcome.result else None, session_file)
    if hint is not None and not json_output:
        sys.stderr.write(hint + "\n")
    journal_error = _keep_journal(plan, outcome.result)
    if journal_error is not None:
        sys.stderr.write(f"dsh-code: {journal_error}\n")
    extra = {"log_error": log_error, "session_error": save_error, "journal_error": journal_error}
    _report(plan, outcome, json_output, emit, {k: v for k, v in extra.items() if v is not None})


def _keep_journal(plan: RunPlan, result: RunResult | None) -> str | None:
    """Write the run's journal to ``--journal FILE``; why it could not be."""
    if plan.journal is None or result is None or result.journal is None:
        return None
    from host.cli._journal_file import JournalFileError, write_journal_file

    assert plan.settings is not None
    try:
        write_journal_file(plan.journal, plan.settings, result.journal)
    except JournalFileError as exc:
        return str(exc)
    return None


def render_paused(result: RunResult, journal: Path | None) -> str:
    """A paused run for a person: what it waits on, and how to continue it."""
    lines = ["⏸ the program paused; it waits on:"]
    for held in result.pending:
        args = json.dumps(held.args, ensure_ascii=False)
        if len(args) > _ARGS_SHOWN:
            args = args[: _ARGS_SHOWN - 1] + "…"
        lines.append(f"  {held.name.split('.', 1)[-1]}({args}): {held.reason}")
    if journal is not None:
        lines.append(f"continue it: dsh-code resume {journal} --yes (run them) or --no (refuse)")
    else:
        lines.append("run it with --journal FILE to be able to continue it (dsh-code resume FILE)")
    return "\n".join(lines)


def _report(
    plan: RunPlan, outcome: RunOutcome, json_output: bool, emit: Any, extra: dict[str, str]
) -> NoReturn:
    result, signum = outcome.result, outcome.signum
    if result is None:
        assert signum is not None  # the loop ends without a result only when a signal stopped it
        sys.stderr.write(f"dsh-code: interrupted by {signal_name(signum)} before the run started\n")
        emit(aborted_json(outcome.logs, signum, started=False))
        raise typer.Exit(exit_code_for(signum))
    if signum is not None and result.error is not None and result.error.kind == "aborted":
        reason = f"interrupted by {signal_name(signum)}"
        result = msgspec.structs.replace(
            result, error=msgspec.structs.replace(result.error, message=reason)
        )
    if json_output:
        obj = result.to_json()
        if plan.journal is not None and result.journal is not None:
            obj["journal"] = str(plan.journal)
        emit({**obj, **extra})
    else:
        terminal = is_terminal(result_stream())
        if result.paused:
            sys.stderr.write(render_paused(result, plan.journal) + "\n")
        elif result.error is None:
            if result.has_value:
                shown = render_value(result.value, terminal=terminal, is_repr=result.value_is_repr)
                write_result(shown + "\n")
            if result.state_dropped:
                sys.stderr.write(render_dropped(result.state_dropped) + "\n")
        else:
            sys.stderr.write(render_failure(result.error, terminal=is_terminal(sys.stderr)) + "\n")
    if signum is not None:
        raise typer.Exit(exit_code_for(signum))
    if result.paused:
        raise typer.Exit(EXIT_PAUSED)
    trouble = "session_error" in extra or "journal_error" in extra
    raise typer.Exit(EXIT_OK if result.ok and not trouble else EXIT_FAILED)
