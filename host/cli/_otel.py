"""``--otel`` and ``--otel-capture`` of ``run`` and ``mcp``: spans and metrics over OTLP/HTTP."""

from __future__ import annotations

import dataclasses
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Annotated

import typer

from host.cli._errors import UsageFailure

__all__ = ("OtelCaptureOption", "OtelOption", "OtelPlan", "exporting", "otel_plan")

OtelOption = Annotated[
    bool,
    typer.Option(
        "--otel",
        help="Export spans and metrics over OTLP/HTTP (to OTEL_EXPORTER_OTLP_ENDPOINT, default "
        "http://localhost:4318; the OTEL_* variables alone do too). Needs the otel extra.",
    ),
]
OtelCaptureOption = Annotated[
    list[str],
    typer.Option(
        "--otel-capture",
        metavar="WHAT",
        help="Also record on spans (may hold secrets): program, logs, result, tool_arguments, "
        "tool_results, or all (repeatable or comma-separated).",
        show_default=False,
    ),
]


@dataclasses.dataclass(frozen=True)
class OtelPlan:
    """Whether to export, and what to capture (checked before anything starts)."""

    export: bool
    required: bool
    """``--otel`` was given: a missing extra is a usage error, not a warning."""
    capture: frozenset[str]


def otel_plan(flag: bool, capture: list[str]) -> OtelPlan:
    """The plan of ``--otel`` and ``--otel-capture``; raises ``UsageFailure``."""
    from host.telemetry import CAPTURE_FIELDS, otlp_requested

    fields: set[str] = set()
    for value in capture:
        for name in (part.strip() for part in value.split(",")):
            if name == "all":
                fields.update(CAPTURE_FIELDS)
            elif name in CAPTURE_FIELDS:
                fields.add(name)
            elif name:
                raise UsageFailure(
                    f"--otel-capture: unknown {name!r} (one of {', '.join(CAPTURE_FIELDS)}, all)"
                )
    export = flag or otlp_requested(os.environ)
    if fields and not export:
        raise UsageFailure("--otel-capture needs --otel (or an OTEL_EXPORTER_OTLP_ENDPOINT)")
    return OtelPlan(export=export, required=flag, capture=frozenset(fields))


@contextmanager
def exporting(plan: OtelPlan) -> Iterator[None]:
    """Within: spans and metrics go out over OTLP (a run joins the trace ``TRACEPARENT``
    names); on the way out, what is left is sent (at most a few seconds)."""
    if not plan.export:
        yield
        return
    from host.telemetry import (
        TelemetrySetupError,
        configure,
        current_settings,
        environment_context,
        setup_otlp,
    )

    try:
        shutdown = setup_otlp()
    except TelemetrySetupError as exc:
        if plan.required:
            raise UsageFailure(f"--otel: {exc}") from None
        sys.stderr.write(f"dsh-code: the OTEL_* variables are ignored: {exc}\n")
        yield
        return
    previous = configure(dataclasses.replace(current_settings(), capture=plan.capture))
    try:
        with environment_context():
            yield
    finally:
        configure(previous)
        shutdown()
