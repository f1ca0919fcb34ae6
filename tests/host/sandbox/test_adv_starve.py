"""Budgets the host's interpreter cannot delay: runs stop on time while the host holds the GIL."""

from __future__ import annotations

import time
from typing import Any

import anyio
import pytest

from benchmarks._hostile import _hold_the_interpreter
from host.sandbox import SubprocessRuntime
from runtime import Limits, RunRequest, RunResult
from tests.host.sandbox.hostile import ONE_BACKEND, expect

pytestmark = pytest.mark.anyio

#: How long the host holds its interpreter: longer than any budget below, by far.
_HOG_S = 3.0


async def _run_while_the_host_is_busy(
    rt: SubprocessRuntime, program: str, limits: Limits
) -> tuple[RunResult, float]:
    """Run ``program`` (it calls ``tools.started()`` first), then hold the host's interpreter
    for ``_HOG_S``; the result and when ``run()`` was called (monotonic)."""
    started = anyio.Event()
    results: list[RunResult] = []

    async def on_start(args: Any) -> None:
        started.set()

    async def run() -> None:
        results.append(
            await rt.run(
                RunRequest(program=program, bindings={"tools.started": on_start}, limits=limits)
            )
        )

    await rt.run(RunRequest(program="1"))  # a spare waits: the run starts at once
    began = time.monotonic()
    async with anyio.create_task_group() as tg:
        tg.start_soon(run)
        with anyio.fail_after(10):
            await started.wait()
        await anyio.sleep(0.02)  # the reply is on its way: the program runs on
        _hold_the_interpreter(_HOG_S)
    return results[0], began


@ONE_BACKEND
async def test_the_compute_budget_holds_while_the_host_holds_its_interpreter(
    rt: SubprocessRuntime,
) -> None:
    # SIGXCPU blocked: the child's own CPU timer cannot stop it, only a watchdog can (or the
    # CPU rlimit, two seconds past the budget).
    program = (
        "import signal\nsignal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGXCPU])\n"
        "await tools.started()\nwhile True:\n    pass\n"
    )
    result, _ = await _run_while_the_host_is_busy(
        rt, program, Limits(compute_ms=300, max_wall_ms=20_000)
    )
    expect(result, "budget", "compute")
    assert result.stats is not None
    assert result.stats.compute_ms < 300 + 200, result.stats  # not the host's 3 s, nor 2.3 s


@ONE_BACKEND
async def test_the_wall_budget_holds_while_the_host_holds_its_interpreter(
    rt: SubprocessRuntime,
) -> None:
    program = (
        "import time\nawait tools.started()\n"
        "while True:\n    print(time.monotonic(), flush=True)\n    time.sleep(0.02)\n"
    )
    result, began = await _run_while_the_host_is_busy(
        rt, program, Limits(compute_ms=20_000, max_wall_ms=600)
    )
    expect(result, "budget", "wall")
    last = float(result.logs[-1])
    # the program printed until it was killed: at its deadline, not when the host came back
    assert last < began + 0.6 + 0.3, (last - began, result.stats)
