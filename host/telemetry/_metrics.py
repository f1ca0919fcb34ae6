"""dsh-code's metrics: histograms of run, compute, call and child-wait times, a run counter."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from host.telemetry._names import (
    ATTR_CHILD_SPARE,
    METRIC_CHILD_WAIT,
    METRIC_RUN_COMPUTE,
    METRIC_RUN_DURATION,
    METRIC_RUNS,
    METRIC_TOOL_CALL_DURATION,
)

__all__ = ("Instruments",)

#: Bucket bounds in seconds, from a trivial run (~1 ms) to a wall budget's default (600 s).
_RUN_BOUNDS = (
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
    300.0, 600.0,
)  # fmt: skip
#: Bucket bounds in seconds, from a fast binding call (~20 µs) to a slow tool.
_CALL_BOUNDS = (
    0.00002, 0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
    0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 60.0,
)  # fmt: skip


class Instruments:
    """The instruments of one meter (made once per meter provider)."""

    def __init__(self, meter: Any) -> None:
        self.run_duration = meter.create_histogram(
            METRIC_RUN_DURATION,
            unit="s",
            description="Wall time of a run, from run() to its result.",
            explicit_bucket_boundaries_advisory=_RUN_BOUNDS,
        )
        self.run_compute = meter.create_histogram(
            METRIC_RUN_COMPUTE,
            unit="s",
            description="Busy CPU time of a run's processes (what its compute budget counts).",
            explicit_bucket_boundaries_advisory=_RUN_BOUNDS,
        )
        self.runs = meter.create_counter(
            METRIC_RUNS, unit="{run}", description="Runs, by outcome (ok or the failure kind)."
        )
        self.tool_call_duration = meter.create_histogram(
            METRIC_TOOL_CALL_DURATION,
            unit="s",
            description="Latency of a binding call on the host, by tool.",
            explicit_bucket_boundaries_advisory=_CALL_BOUNDS,
        )
        self.child_wait = meter.create_histogram(
            METRIC_CHILD_WAIT,
            unit="s",
            description="How long a run waited for its child to be ready.",
            explicit_bucket_boundaries_advisory=_CALL_BOUNDS,
        )

    def run_finished(
        self, attributes: Mapping[str, Any], wall_s: float, compute_s: float | None
    ) -> None:
        """One run's figures."""
        self.run_duration.record(wall_s, attributes)
        if compute_s is not None:
            self.run_compute.record(compute_s, attributes)
        self.runs.add(1, attributes)

    def tool_call_finished(self, attributes: Mapping[str, Any], seconds: float) -> None:
        """One binding call's latency."""
        self.tool_call_duration.record(seconds, attributes)

    def child_ready(self, seconds: float, *, spare: bool) -> None:
        """How long a run waited for its child."""
        self.child_wait.record(seconds, {ATTR_CHILD_SPARE: spare})
