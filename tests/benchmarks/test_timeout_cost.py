"""benchmarks/timeout_cost.py: a timed and an untimed tool, each called through the pipeline."""

from __future__ import annotations

import anyio
import pytest

from benchmarks.timeout_cost import _async, _per_call_us, _registry, _sync


@pytest.mark.parametrize("execute", [_sync, _async])
def test_each_registry_calls_its_tool_and_only_the_timed_one_has_a_timeout(execute: object) -> None:
    plain, timed = _registry(execute, None), _registry(execute, 60_000)
    assert [r.get("t").timeout_ms for r in (plain, timed)] == [None, 60_000]  # type: ignore[union-attr]

    async def both() -> list[object]:
        return [(await r.invoke("t", {})).value for r in (plain, timed)]

    assert anyio.run(both) == [1, 1]
    assert anyio.run(_per_call_us, timed) > 0
