"""Blocks of trivial runs over fake runtimes: warm-up not counted, failed runs counted apart."""

from __future__ import annotations

from typing import Any

import pytest

from benchmarks._common import Row
from benchmarks._trivial import dsh_block, floor_block, monty_block
from runtime import RunError, RunRequest, RunResult
from runtime.testing import InProcessRuntime

pytestmark = pytest.mark.anyio


class Flaky:
    """A runtime whose every third run fails, and which records the programs it was given."""

    def __init__(self) -> None:
        self.programs: list[str] = []

    async def run(self, request: RunRequest) -> RunResult:
        self.programs.append(request.program)
        if len(self.programs) % 3 == 0:
            return RunResult(logs=[], error=RunError(kind="died", message="killed"))
        return RunResult(logs=[], value=eval(request.program))


async def test_a_block_counts_its_runs_after_the_warm_up() -> None:
    row = Row("w", "s", "ms", {"value": []})
    async with InProcessRuntime() as rt:
        await dsh_block(rt, row, 5, 0.0, warmup=2)
        assert rt.runs == 7
    assert len(row.samples) == 5 and row.failures == 0
    assert all(x >= 0 for x in row.samples)


async def test_failed_runs_are_counted_and_timed_nowhere() -> None:
    row = Row("w", "s", "ms", {"value": []})
    rt = Flaky()
    await dsh_block(rt, row, 9, 0.0, warmup=0)
    assert row.failures == 3 and len(row.samples) == 6
    assert row.facts["failed_as"] == {"died": 3}
    assert len(set(rt.programs)) == 9  # a new program text every run


async def test_a_wrong_value_is_a_failure() -> None:
    class Wrong(Flaky):
        async def run(self, request: RunRequest) -> RunResult:
            return RunResult(logs=[], value=-1)

    row = Row("w", "s", "ms", {"value": []})
    await dsh_block(Wrong(), row, 2, 0.0, warmup=0)
    assert row.failures == 2 and row.samples == []


class FakePool:
    """A monty-like sync pool: ``checkout()`` gives a session whose ``feed_run`` evaluates."""

    def __init__(self, fail: bool = False) -> None:
        self.fail = fail

    def checkout(self) -> Any:
        pool = self

        class Session:
            def __enter__(self) -> Session:
                return self

            def __exit__(self, *exc_info: object) -> None:
                return None

            def feed_run(self, code: str) -> Any:
                if pool.fail:
                    raise RuntimeError("crashed")
                return eval(code)

        return Session()


def test_a_monty_block_counts_values_and_exceptions() -> None:
    good, bad = Row("w", "m", "ms", {"value": []}), Row("w", "m", "ms", {"value": []})
    monty_block(FakePool(), good, 4, 0.0)
    monty_block(FakePool(fail=True), bad, 4, 0.0)
    assert (len(good.samples), good.failures) == (4, 0)
    assert (len(bad.samples), bad.failures) == (0, 4)


def test_the_floor_evaluates_each_program() -> None:
    row = Row("w", "floor", "ms", {"value": []})
    floor_block(row, 10)
    assert len(row.samples) == 10 and row.failures == 0
