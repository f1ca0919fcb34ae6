"""Section 12: tracing — what OpenTelemetry costs a run and a binding call, off and on.

Off is the default: ``opentelemetry-api`` only, no tracer or meter provider anywhere. On is
the SDK as a user sets it up, exporting to an exporter that drops everything (the SDK's own
work, not a collector's): a ``TracerProvider`` with a ``BatchSpanProcessor`` and a
``MeterProvider`` with a periodic reader. Workloads, on ``SubprocessRuntime()``, off and on
interleaved run by run:

- a trivial run (``f"{i} + 1"``) back to back, from ``run()`` to its result;
- one awaited call from outside, (T(N calls) - T(0)) / N, through a raw binding and through
  code mode (``ToolRegistry`` + ``CodeMode.run_program``).

In this process, without a child, the telemetry's own work, over many repetitions (blocks of
off and on alternating): per run, ``trace_run`` entered, ended with a result and left; per
call, off, what code mode adds to a call (``name_tool_call``: the only telemetry on the call
path while tracing is off), on, a traced binding awaited against the bare one. Targets
(DESIGN.md): on, a trivial run's p50 at most 2 % above off's; off, at most 5 µs per call.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from benchmarks._common import (
    DSH,
    Config,
    Row,
    Section,
    Target,
    Unavailable,
    figure,
    relative,
    stat,
    trivial_program,
)
from host.codemode import CodeMode
from host.sandbox import SubprocessRuntime
from host.telemetry import TelemetrySettings, configure, name_tool_call, trace_run
from host.tools import ToolRegistry, define_tool
from runtime import CallInfo, RunRequest, RunResult, RunStats, current_call

OFF = f"{DSH}, tracing off (no SDK)"
ON = f"{DSH}, tracing on (SDK, exporter dropping everything)"
TRIVIAL = "trivial run, back to back"
CALL_RAW = "one awaited call, raw binding, from outside: (T(N) - T(0)) / N"
CALL_CODEMODE = "one awaited call, code mode, from outside: (T(N) - T(0)) / N"
PER_RUN = "telemetry's work per run (in process: trace_run, end)"
PER_CALL = "telemetry's work per call (in process: off, name_tool_call; on, a traced binding)"
LOOP = "# run {i}\nfor _ in range({n}):\n    await tools.noop()\nreturn 1\n"


def sdk_settings() -> TelemetrySettings | None:
    """The SDK with exporters that drop everything; None without the otel extra."""
    try:
        from opentelemetry.sdk.metrics import MeterProvider
        from opentelemetry.sdk.metrics.export import (
            MetricExporter,
            MetricExportResult,
            PeriodicExportingMetricReader,
        )
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import (
            BatchSpanProcessor,
            SpanExporter,
            SpanExportResult,
        )
    except ImportError:
        return None

    class DropSpans(SpanExporter):
        def export(self, spans: Sequence[Any]) -> SpanExportResult:
            return SpanExportResult.SUCCESS

    class DropMetrics(MetricExporter):
        def export(
            self, metrics_data: Any, timeout_millis: float = 10_000, **kwargs: Any
        ) -> MetricExportResult:
            return MetricExportResult.SUCCESS

        def force_flush(self, timeout_millis: float = 10_000) -> bool:
            return True

        def shutdown(self, timeout_millis: float = 30_000, **kwargs: Any) -> None:
            return None

    tracer_provider = TracerProvider(shutdown_on_exit=False)
    # a queue the in-process loops cannot fill: the SDK's drop path (a log line per span
    # dropped) would be what they measured
    tracer_provider.add_span_processor(BatchSpanProcessor(DropSpans(), max_queue_size=1 << 16))
    reader = PeriodicExportingMetricReader(DropMetrics(), export_interval_millis=60_000)
    meter_provider = MeterProvider(metric_readers=[reader], shutdown_on_exit=False)
    return TelemetrySettings(tracer_provider=tracer_provider, meter_provider=meter_provider)


def shutdown(settings: TelemetrySettings) -> None:
    """Stop the SDK's threads."""
    providers: list[Any] = [settings.tracer_provider, settings.meter_provider]
    for provider in providers:
        if provider is not None:
            provider.shutdown()


async def _noop(args: Any) -> None:
    return None


class _Facts:
    language = "python"
    isolation = "namespaces"


def per_run_us(reps: int) -> float:
    """The telemetry's work for one run, in µs (with the settings configured now)."""
    request = RunRequest(program="1", bindings={"noop": _noop})
    stats = RunStats(isolation="namespaces", compute_ms=1.0, wall_ms=2.0, calls=1, dropped_frames=0)
    result = RunResult(logs=["a line"], value=2, stats=stats)
    t = time.perf_counter()
    for _ in range(reps):
        with trace_run(_Facts(), request) as traced:
            traced.end(result)
    return (time.perf_counter() - t) / reps * 1e6


async def per_call_us(reps: int, *, traced: bool) -> float:
    """The telemetry's work for one awaited call, in µs: ``traced``, a traced binding against
    the bare one; else code mode's ``name_tool_call`` and the bare binding against it alone."""
    request = RunRequest(program="1", bindings={"noop": _noop})
    token = current_call.set(CallInfo("bench", 1))
    try:
        with trace_run(_Facts(), request) as run:
            wrapped = run.request.bindings["noop"]
            t = time.perf_counter()
            for _ in range(reps):
                await _noop(None)
            bare = time.perf_counter() - t
            t = time.perf_counter()
            if traced:
                for _ in range(reps):
                    await wrapped(None)
            else:
                for _ in range(reps):
                    name_tool_call("noop")
                    await _noop(None)
            took = time.perf_counter() - t
            run.end(RunResult(logs=[]))
    finally:
        current_call.reset(token)
    return (took - bare) / reps * 1e6


def _codemode(rt: SubprocessRuntime) -> Callable[[str], Awaitable[RunResult]]:
    registry = ToolRegistry()

    async def execute(args: Any, ctx: Any) -> None:
        return None

    registry.register(
        define_tool(name="noop", description="Nothing.", parameters={}, execute=execute)
    )
    return CodeMode(registry, rt).run_program


async def _outside(run: Callable[[str], Awaitable[RunResult]], row: Row, n: int, i: int) -> None:
    t = time.perf_counter()
    with_calls = await run(LOOP.format(i=i, n=n))
    t_n = time.perf_counter() - t
    t = time.perf_counter()
    without = await run(LOOP.format(i=i, n=0))
    t_0 = time.perf_counter() - t
    if with_calls.value == 1 and without.value == 1:
        row.metrics["value"].append((t_n - t_0) / n * 1e6)
    else:
        row.failures += 1


async def _trivial(rt: SubprocessRuntime, row: Row) -> float | None:
    program, expected = trivial_program()
    t = time.perf_counter()
    result = await rt.run(RunRequest(program=program))
    took = (time.perf_counter() - t) * 1000
    if result.value == expected:
        row.metrics["value"].append(took)
        return took
    row.failures += 1
    return None


def _pair(section: Section, workload: str, unit: str) -> tuple[Row, Row]:
    off = section.add(Row(workload, OFF, unit, {"value": []}))
    on = section.add(Row(workload, ON, unit, {"value": []}))
    return off, on


async def run(config: Config) -> Section:
    section = Section(
        "tracing",
        "12. Tracing",
        "What OpenTelemetry costs: a trivial run and an awaited call with tracing off (no SDK) "
        "and on (the SDK, exporting nowhere), interleaved; the telemetry's own work per run and "
        "per call, in process.",
        metric_names=["value", "added"],
    )
    on_settings = sdk_settings()
    workloads = ((TRIVIAL, "ms"), (CALL_RAW, "µs"), (CALL_CODEMODE, "µs"))
    micro = ((PER_RUN, "µs"), (PER_CALL, "µs"))
    if on_settings is None:
        why = "needs the otel extra (opentelemetry-sdk)"
        for workload, unit in (*workloads, *micro):
            section.add(Row(workload, OFF, unit, available=False, note=why))
            section.add(Unavailable(workload, ON, unit, why))
        return section
    rows = {w: _pair(section, w, unit) for w, unit in (*workloads, *micro)}
    rows[TRIVIAL][1].metrics["added"] = []
    off_settings = TelemetrySettings()
    previous = configure(off_settings)
    try:
        async with SubprocessRuntime() as rt:
            codemode = _codemode(rt)

            async def raw(program: str) -> RunResult:
                return await rt.run(RunRequest(program=program, bindings={"tools.noop": _noop}))

            for i in range(config.n(6, 20)):  # warm up both ways
                configure(on_settings if i % 2 else off_settings)
                await _trivial(rt, Row("", "", "", {"value": []}))
            for i in range(config.n(60, 400)):
                took: dict[int, float | None] = {}
                for side in (0, 1) if i % 2 == 0 else (1, 0):  # neither always first
                    configure(on_settings if side else off_settings)
                    took[side] = await _trivial(rt, rows[TRIVIAL][side])
                off_ms, on_ms = took[0], took[1]
                if off_ms is not None and on_ms is not None:  # a pair: slow drifts cancel
                    rows[TRIVIAL][1].metrics["added"].append(on_ms - off_ms)
            # apart from the trivial runs: a run after hundreds of calls waits for its spare
            n_calls = config.n(100, 300)
            for i in range(config.n(15, 100)):
                for side in (0, 1) if i % 2 == 0 else (1, 0):
                    configure(on_settings if side else off_settings)
                    await _outside(raw, rows[CALL_RAW][side], n_calls, i)
                    await _outside(codemode, rows[CALL_CODEMODE][side], n_calls, i)
        for i in range(config.n(10, 40)):
            for side in (0, 1) if i % 2 == 0 else (1, 0):
                configure(on_settings if side else off_settings)
                rows[PER_RUN][side].metrics["value"].append(per_run_us(config.n(200, 1000)))
                rows[PER_CALL][side].metrics["value"].append(
                    await per_call_us(config.n(2000, 10_000), traced=bool(side))
                )
    finally:
        configure(previous)
        shutdown(on_settings)
    off, on = rows[TRIVIAL]
    on.target = relative(
        Target("p50", "<=", None, what="tracing on: a trivial run", peer=figure(off)),
        1.02,
        off,
        "tracing off",
    )
    reference = stat(off)
    rows[PER_RUN][1].target = Target(
        "p50",
        "<=",
        None if reference is None else reference * 1000 * 0.02,
        what="tracing on: the telemetry's work per run",
        basis="no data" if reference is None else f"2 % of a trivial run, off ({reference:.3g} ms)",
    )
    rows[PER_CALL][0].target = Target(
        "p50", "<=", 5.0, what="tracing off: the telemetry's work per call"
    )
    section.notes.append(
        "The trivial runs come in pairs, off and on back to back (in turn first); the on row's "
        "`added` metric is each pair's difference (its spread is the machine's noise: whether "
        "a spare was ready, the load). Per-call rows from outside are (T(N calls) - T(0)) / N, so on - off "
        "is the span work per call; the in-process rows time the telemetry alone (off: a "
        "context-variable look-up; on: a span, its attributes, a histogram record)."
    )
    return section
