"""The names as documented: every span, attribute, event and metric in the README's tracing
section is a constant of host.telemetry, and a run's spans carry the attributes it lists."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

import host.telemetry
from host.sandbox import SubprocessRuntime
from runtime import RunRequest
from tests.host.telemetry.support import Recorded

pytestmark = pytest.mark.anyio

README = Path(__file__).resolve().parents[3] / "README.md"
DOTTED = re.compile(r"`((?:gen_ai|dsh_code|error)\.[a-z_.]+)`")


def _section() -> str:
    text = README.read_text(encoding="utf-8")
    start = text.index("## Tracing and metrics (OpenTelemetry)")
    return text[start : text.index("\n## ", start + 1)]


def _table(after: str) -> dict[str, str]:
    """The first table after the line starting with ``after``: its names and "when" column."""
    section = _section()
    lines = section[section.index(after) :].splitlines()
    rows: dict[str, str] = {}
    started = False
    for line in lines:
        if line.startswith("| `"):
            started = True
            name, when = (cell.strip() for cell in line.strip("|").split("|")[:2])
            rows[name.strip("`")] = when
        elif started:
            break
    return rows


def _constants() -> set[str]:
    prefixes = ("ATTR_", "EVENT_", "METRIC_")
    found = {getattr(host.telemetry, n) for n in host.telemetry.__all__ if n.startswith(prefixes)}
    return found | {host.telemetry.RUN_SPAN}


def test_every_documented_name_is_a_constant_and_every_constant_is_documented() -> None:
    documented = set(DOTTED.findall(_section()))
    assert documented == _constants()


async def test_a_runs_span_carries_what_the_tables_say(recorded: Recorded) -> None:
    async def add(args: Any) -> int:
        return int(args["a"]) + int(args["b"])

    async with SubprocessRuntime(prefork=0) as rt:
        program = "return await tools.add(a=1, b=2)"
        assert (await rt.run(RunRequest(program=program, bindings={"tools.add": add}))).ok
        await rt.run(RunRequest(program="raise ValueError('x')"))
    ok, failed = recorded.runs()
    run_table = _table("**The run span**")
    always = {name for name, when in run_table.items() if when == "always"}
    assert set(ok.attributes or {}) == always
    failure = {"error.type", "dsh_code.run.exception_type", "dsh_code.run.lineno"}
    assert set(failed.attributes or {}) == always | failure
    assert failure <= set(run_table)
    call_table = _table("**A binding call**")
    (call,) = recorded.children(ok)
    assert set(call.attributes or {}) == {n for n, w in call_table.items() if w == "always"}
    assert {m for m in _table("**Metrics**") if m.startswith("dsh_code.")} == {
        host.telemetry.METRIC_RUN_DURATION,
        host.telemetry.METRIC_RUN_COMPUTE,
        host.telemetry.METRIC_RUNS,
        host.telemetry.METRIC_TOOL_CALL_DURATION,
        host.telemetry.METRIC_CHILD_WAIT,
    }
