"""The binding-call section's programs and paths over the in-process fake runtime."""

from __future__ import annotations

import pytest

from benchmarks._calls import (
    GATHER,
    THREADS,
    _Dsh,
    _in_program_ms,
    _outside,
    _timed,
)
from benchmarks._common import Row
from runtime.testing import InProcessRuntime
from tests.conftest import ALL_BACKENDS

pytestmark = pytest.mark.anyio

#: The programs use asyncio themselves: the in-process fake runs them on the host's loop.
ASYNCIO_HOSTS = pytest.mark.parametrize(
    "anyio_backend", [p for p in ALL_BACKENDS if "asyncio" in str(p.id)]
)


def _row() -> Row:
    return Row("w", "s", "µs", {"value": []})


@ASYNCIO_HOSTS
@pytest.mark.parametrize("style", ["async", "sync"])
@pytest.mark.parametrize("codemode", [True, False], ids=["codemode", "raw"])
async def test_one_call_timed_in_the_program_and_from_outside(style: str, codemode: bool) -> None:
    async with InProcessRuntime() as rt:
        dsh = _Dsh(rt, style, codemode)
        timed, outside = _row(), _row()
        await _timed(dsh, timed, 60, 1)
        await _outside(dsh, outside, 20, 2)
    assert timed.failures == 0 and len(timed.samples) == 10  # the first 50 are warm-up
    assert outside.failures == 0 and len(outside.samples) == 1
    # code mode's calls go through the registry: each one emits its dispatch event
    assert dsh.events == (60 + 20 if codemode else 0)


@ASYNCIO_HOSTS
@pytest.mark.parametrize("codemode", [True, False], ids=["codemode", "raw"])
async def test_slow_calls_overlap_gathered_and_from_threads(codemode: bool) -> None:
    async with InProcessRuntime() as rt:
        gathered, threads = _row(), _row()
        await _in_program_ms(
            _Dsh(rt, "async", codemode), gathered, GATHER.format(i=1, name="slow", n=10)
        )
        await _in_program_ms(_Dsh(rt, "sync", codemode), threads, THREADS.format(i=1))
    for row in (gathered, threads):
        assert row.failures == 0 and len(row.samples) == 1
        assert 100 <= row.samples[0] < 1000  # 10 calls of 100 ms at once, not one after another


@ASYNCIO_HOSTS
async def test_a_program_that_fails_is_counted() -> None:
    async with InProcessRuntime() as rt:
        row = _row()
        await _in_program_ms(_Dsh(rt, "async", False), row, "raise ValueError('no')")
    assert row.failures == 1 and row.samples == []
