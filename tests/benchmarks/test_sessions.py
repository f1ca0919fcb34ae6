"""The session section's programs over the in-process fake: each step's value in a session and
without one (a session emulated as the seed and the steps so far in one program)."""

from __future__ import annotations

import importlib.util

import pytest

from benchmarks._sessions import DICT, FRAME, STEPS, WORKLOADS
from runtime import RunRequest
from runtime.testing import InProcessRuntime

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize("workload", [DICT, FRAME])
async def test_each_step_gives_its_value_with_state_and_without(workload: str) -> None:
    if workload == FRAME and importlib.util.find_spec("pandas") is None:
        pytest.skip("pandas is not installed (the bench extra)")
    seed, step, in_session, stateless = WORKLOADS[workload]
    async with InProcessRuntime() as rt:
        carried = seed
        for j in range(STEPS):
            text = step.format(uid=j, j=j)
            carried += text
            with_state = await rt.run(RunRequest(program=carried))
            without = await rt.run(RunRequest(program=text))
            assert with_state.error is None and with_state.value == in_session(j)
            assert without.error is None and without.value == stateless(j)


def test_a_step_text_is_new_every_run() -> None:
    _, step, _, _ = WORKLOADS[DICT]
    assert step.format(uid=1, j=0) != step.format(uid=2, j=0)
