"""The metrics of real runs: runs by outcome, durations, compute, calls by tool, child waits."""

from __future__ import annotations

from typing import Any

import pytest

from host.sandbox import SubprocessRuntime
from host.telemetry import (
    ATTR_CHILD_SPARE,
    ATTR_DECISION,
    ATTR_ERROR_TYPE,
    ATTR_ISOLATION,
    ATTR_LANGUAGE,
    ATTR_RUN_OUTCOME,
    ATTR_TOOL_NAME,
    METRIC_CHILD_WAIT,
    METRIC_RUN_COMPUTE,
    METRIC_RUN_DURATION,
    METRIC_RUNS,
    METRIC_TOOL_CALL_DURATION,
)
from runtime import Limits, RunRequest, ToolCallError
from tests.host.telemetry.support import Recorded

pytestmark = pytest.mark.anyio


async def _add(args: Any) -> int:
    return int(args["a"]) + int(args["b"])


async def _deny(args: Any) -> None:
    raise ToolCallError("deny", "no", "DENIED")


async def test_runs_calls_and_waits_are_counted(
    recorded: Recorded, runtime: SubprocessRuntime
) -> None:
    program = "try:\n    await deny()\nexcept ToolCallError:\n    pass\nreturn await add(a=1, b=2)"
    bindings = {"add": _add, "deny": _deny}
    for _ in range(2):
        assert (await runtime.run(RunRequest(program=program, bindings=bindings))).value == 3
    await runtime.run(RunRequest(program="while True:\n    pass", limits=Limits(compute_ms=200)))
    await runtime.run(RunRequest(program="def (:"))
    isolation = runtime.isolation
    runs = {p[0][ATTR_RUN_OUTCOME]: p[1].value for p in recorded.points(METRIC_RUNS)}
    assert runs == {"ok": 2, "budget": 1, "parse": 1}
    for attributes, _ in recorded.points(METRIC_RUNS):
        assert attributes[ATTR_LANGUAGE] == "python" and attributes[ATTR_ISOLATION] == isolation
    durations = {p[0][ATTR_RUN_OUTCOME]: p[1] for p in recorded.points(METRIC_RUN_DURATION)}
    assert durations["ok"].count == 2 and durations["budget"].min >= 0.2
    compute = {p[0][ATTR_RUN_OUTCOME]: p[1] for p in recorded.points(METRIC_RUN_COMPUTE)}
    assert compute["budget"].min >= 0.2
    calls = {
        (p[0][ATTR_TOOL_NAME], p[0][ATTR_DECISION], p[0].get(ATTR_ERROR_TYPE)): p[1].count
        for p in recorded.points(METRIC_TOOL_CALL_DURATION)
    }
    assert calls == {("add", "allowed", None): 2, ("deny", "denied", "DENIED"): 2}
    waits = recorded.points(METRIC_CHILD_WAIT)
    assert sum(p[1].count for p in waits) == 3  # every run that started a child
    assert {p[0][ATTR_CHILD_SPARE] for p in waits} <= {True, False}


async def test_a_fork_on_demand_is_not_a_spare(recorded: Recorded) -> None:
    async with SubprocessRuntime(prefork=0) as rt:
        await rt.run(RunRequest(program="1"))
    ((attributes, point),) = recorded.points(METRIC_CHILD_WAIT)
    assert attributes == {ATTR_CHILD_SPARE: False} and point.count == 1


async def test_histograms_have_bounds_for_seconds(recorded: Recorded) -> None:
    async with SubprocessRuntime(prefork=0) as rt:
        await rt.run(RunRequest(program="return await add(a=1, b=1)", bindings={"add": _add}))
    ((_, run),) = recorded.points(METRIC_RUN_DURATION)
    ((_, call),) = recorded.points(METRIC_TOOL_CALL_DURATION)
    assert run.explicit_bounds[0] == 0.001 and run.explicit_bounds[-1] == 600.0
    assert call.explicit_bounds[0] == 0.00002
