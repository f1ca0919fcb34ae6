"""The tracing section's pieces: the SDK set up to export nowhere, the in-process measures."""

from __future__ import annotations

import pytest

from benchmarks._common import Config
from benchmarks._tracing import OFF, ON, PER_CALL, per_call_us, per_run_us, run, sdk_settings
from host.telemetry import TelemetrySettings, configure, trace_run
from runtime import RunRequest

pytestmark = pytest.mark.anyio


class _Facts:
    language = "python"
    isolation = "process"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def test_the_in_process_measures_time_the_telemetry_off_and_on() -> None:
    on = sdk_settings()
    assert on is not None and on.tracer_provider is not None and on.meter_provider is not None
    previous = configure(TelemetrySettings())
    try:
        assert per_run_us(10) > 0
        assert await per_call_us(100, traced=False) < 1_000
        configure(on)
        # the settings really trace: a run's bindings are wrapped
        request = RunRequest(program="1", bindings={"f": per_call_us})  # type: ignore[dict-item]
        with trace_run(_Facts(), request) as traced:
            assert traced.request.bindings is not request.bindings
            assert callable(traced.request.bindings["f"])  # wrapped on first look-up
        assert per_run_us(10) > 0
        assert await per_call_us(100, traced=True) > 0
    finally:
        configure(previous)
        for provider in (on.tracer_provider, on.meter_provider):
            provider.shutdown()  # type: ignore[union-attr]


@pytest.mark.bench
async def test_the_section_runs_and_checks_its_targets() -> None:
    section = await run(Config(quick=True))
    rows = {(r.workload, r.system): r for r in section.rows}
    assert all(r.failures == 0 and r.samples for r in section.rows)
    assert rows[(PER_CALL, OFF)].target is not None
    assert rows[(PER_CALL, ON)].target is None
