"""Section 2: binding calls, program -> host -> program.

Workloads:
- one sequential round trip of a no-op binding, timed inside the program around each
  ``await tools.noop()`` (a distribution), and from outside as
  (end-to-end time of a run making N calls - that of a run making none) / N, the only way to
  time monty (its in-sandbox clock is virtual);
- the same through the host tool pipeline (``host.tools`` registry ``invoke``: validate,
  hooks, guard, wrappers, finalize) when ``host.tools`` has it;
- 1,000 no-op calls gathered with ``asyncio.gather`` (time for all, and calls per second);
- 10 concurrency-safe calls that each sleep 100 ms on the host, gathered.
"""

from __future__ import annotations

import asyncio
import statistics
import time
from collections.abc import Awaitable, Callable
from typing import Any

import anyio

from benchmarks._common import DSH, MONTY, Config, Row, Section, Target, Unavailable, tools_pipeline
from benchmarks._peers import monty, monty_missing
from host.sandbox import SubprocessRuntime
from runtime import Limits, RunRequest

ROUND_TRIP = (
    "import time\n"
    "samples = []\n"
    "for _ in range(N):\n"
    "    t = time.perf_counter()\n"
    "    await tools.noop()\n"
    "    samples.append((time.perf_counter() - t) * 1e6)\n"
    "return samples"
)
LOOP = "for _ in range(N):\n    await tools.noop()\nreturn 1"
GATHER = (
    "import asyncio, time\n"
    "t = time.perf_counter()\n"
    "await asyncio.gather(*[tools.{name}() for _ in range(N)])\n"
    "return (time.perf_counter() - t) * 1000"
)
MONTY_LOOP = "for _ in range({n}):\n    await noop()\n1"
MONTY_SYNC_LOOP = "for _ in range({n}):\n    noop()\n1"
MONTY_GATHER = "import asyncio\nawait asyncio.gather(*[{name}() for _ in range({n})])\n1"

SEQ = "one binding call, sequential round trip"
SEQ_OUT = "one binding call, from outside: (T(N calls) - T(0)) / N"
GATHER_1000 = "1,000 no-op calls gathered"
GATHER_SLOW = "10 concurrency-safe 100 ms calls gathered"

Binding = Callable[[Any], Awaitable[Any]]


async def noop(args: Any) -> Any:
    return None


async def slow(args: Any) -> Any:
    await anyio.sleep(0.1)
    return None


def _pipeline_bindings() -> dict[str, Binding] | str:
    """Bindings ``noop`` and ``slow`` that go through the host tool pipeline, or why not."""
    found = tools_pipeline()
    if isinstance(found, str):
        return f"not available: {found}"
    registry_cls, tools = found
    registry = registry_cls()

    async def execute_noop(args: Any, ctx: Any) -> Any:
        return None

    async def execute_slow(args: Any, ctx: Any) -> Any:
        await anyio.sleep(0.1)
        return None

    registry.register(
        tools.define_tool(
            name="noop", description="Do nothing.", parameters={}, execute=execute_noop
        )
    )
    registry.register(
        tools.define_tool(
            name="slow",
            description="Sleep 100 ms.",
            parameters={},
            execute=execute_slow,
            concurrency_safe=True,
        )
    )
    thaw = getattr(tools, "thaw", lambda v: v)

    def via(name: str) -> Binding:
        async def binding(args: Any) -> Any:
            result = await registry.invoke(name, args or {})
            if result.is_error:
                raise RuntimeError(str(result.error))
            return thaw(result.value)

        return binding

    return {"tools.noop": via("noop"), "tools.slow": via("slow")}


async def _dsh(
    section: Section,
    config: Config,
    rt: SubprocessRuntime,
    system: str,
    bindings: dict[str, Binding],
) -> None:
    row = section.add(Row(SEQ, system, "µs", {"value": []}, target=Target("p50", "<=", 60)))
    failures = 0
    for _ in range(config.n(1, 5)):
        n = config.n(300, 1000)
        r = await rt.run(RunRequest(program=ROUND_TRIP, inputs={"N": n}, bindings=bindings))
        if not isinstance(r.value, list):
            failures += 1
            continue
        row.metrics["value"] += [float(x) for x in r.value[50:]]
    row.facts["failures"] = failures
    row.note = "timed inside the program; the first 50 calls of each run are warm-up"

    out = section.add(Row(SEQ_OUT, system, "µs", {"value": []}))
    n = config.n(200, 1000)
    for _ in range(config.n(3, 10)):
        t = time.perf_counter()
        r_n = await rt.run(RunRequest(program=LOOP, inputs={"N": n}, bindings=bindings))
        t_n = time.perf_counter() - t
        t = time.perf_counter()
        await rt.run(RunRequest(program=LOOP, inputs={"N": 0}, bindings=bindings))
        t_0 = time.perf_counter() - t
        if r_n.value == 1:
            out.metrics["value"].append((t_n - t_0) / n * 1e6)
    out.facts["calls_per_run"] = n

    gather = section.add(Row(GATHER_1000, system, "ms", {"value": []}))
    for _ in range(config.n(3, 20)):
        r = await rt.run(
            RunRequest(program=GATHER.format(name="noop"), inputs={"N": 1000}, bindings=bindings)
        )
        if isinstance(r.value, float):
            gather.metrics["value"].append(r.value)
    if gather.samples:
        gather.facts["calls_per_s_at_p50"] = round(1000 / statistics.median(gather.samples) * 1000)
    gather.note = "timed inside the program; default max_parallel_sub_calls (10)"

    slow_row = section.add(
        Row(GATHER_SLOW, system, "ms", {"value": []}, target=Target("p50", "<=", 130))
    )
    for _ in range(config.n(3, 20)):
        r = await rt.run(
            RunRequest(
                program=GATHER.format(name="slow"),
                inputs={"N": 10},
                bindings=bindings,
                limits=Limits(max_parallel_sub_calls=10),
            )
        )
        if isinstance(r.value, float):
            slow_row.metrics["value"].append(r.value)
    slow_row.note = "timed inside the program"


async def _monty(section: Section, config: Config) -> None:
    pm = monty()
    systems = [f"{MONTY} (AsyncMonty, async host function)", f"{MONTY} (Monty, sync host function)"]
    if pm is None:
        for workload in (SEQ_OUT, GATHER_1000, GATHER_SLOW):
            section.add(Unavailable(workload, systems[0], "", monty_missing()))
        return
    limits = pm.ResourceLimits(max_suspensions=1_000_000)

    async def anoop(*args: Any, **kwargs: Any) -> None:
        return None

    async def aslow(*args: Any, **kwargs: Any) -> None:
        await asyncio.sleep(0.1)

    n = config.n(200, 1000)
    reps = config.n(3, 10)
    out = section.add(Row(SEQ_OUT, systems[0], "µs", {"value": []}))
    gather = section.add(Row(GATHER_1000, systems[0], "ms", {"value": []}))
    slow_row = section.add(Row(GATHER_SLOW, systems[0], "ms", {"value": []}))
    async with pm.AsyncMonty() as pool:

        async def feed(code: str, lookup: dict[str, Any]) -> float:
            t = time.perf_counter()
            async with pool.checkout(limits=limits) as session:
                await session.feed_run(code, external_lookup=lookup)
            return time.perf_counter() - t

        for _ in range(reps):
            t_n = await feed(MONTY_LOOP.format(n=n), {"noop": anoop})
            t_0 = await feed(MONTY_LOOP.format(n=0), {"noop": anoop})
            out.metrics["value"].append((t_n - t_0) / n * 1e6)
        for _ in range(config.n(3, 20)):
            t_n = await feed(MONTY_GATHER.format(name="noop", n=1000), {"noop": anoop})
            t_0 = await feed(MONTY_GATHER.format(name="noop", n=0), {"noop": anoop})
            gather.metrics["value"].append((t_n - t_0) * 1000)
            t_n = await feed(MONTY_GATHER.format(name="slow", n=10), {"slow": aslow})
            slow_row.metrics["value"].append((t_n - t_0) * 1000)
    out.facts["calls_per_run"] = n
    if gather.samples:
        gather.facts["calls_per_s_at_p50"] = round(1000 / statistics.median(gather.samples) * 1000)
    gather.note = slow_row.note = "end to end minus an empty gather run (monty's clock is virtual)"

    sync_row = section.add(Row(SEQ_OUT, systems[1], "µs", {"value": []}))

    def snoop(*args: Any, **kwargs: Any) -> None:
        return None

    with pm.Monty() as spool:
        for _ in range(reps):
            times = []
            for count in (n, 0):
                t = time.perf_counter()
                with spool.checkout(limits=limits) as session:
                    session.feed_run(
                        MONTY_SYNC_LOOP.format(n=count), external_lookup={"noop": snoop}
                    )
                times.append(time.perf_counter() - t)
            sync_row.metrics["value"].append((times[0] - times[1]) / n * 1e6)
    sync_row.facts["calls_per_run"] = n


async def run(config: Config) -> Section:
    section = Section(
        "calls",
        "2. Binding calls",
        "Cost of calling the host from a program: one round trip, 1,000 gathered, 10 slow ones "
        "gathered.",
    )
    pipeline = _pipeline_bindings()
    async with SubprocessRuntime() as rt:
        await rt.run(RunRequest(program="1"))
        raw: dict[str, Binding] = {"tools.noop": noop, "tools.slow": slow}
        await _dsh(section, config, rt, f"{DSH}, raw binding", raw)
        system = f"{DSH}, through host.tools pipeline"
        if isinstance(pipeline, str):
            targets = {SEQ: Target("p50", "<=", 60), GATHER_SLOW: Target("p50", "<=", 130)}
            units = {SEQ: "µs", SEQ_OUT: "µs", GATHER_1000: "ms", GATHER_SLOW: "ms"}
            for workload in (SEQ, SEQ_OUT, GATHER_1000, GATHER_SLOW):
                section.add(
                    Unavailable(workload, system, units[workload], pipeline, targets.get(workload))
                )
        else:
            await _dsh(section, config, rt, system, pipeline)
    await _monty(section, config)
    section.rows.sort(key=lambda r: [SEQ, SEQ_OUT, GATHER_1000, GATHER_SLOW].index(r.workload))
    section.notes += [
        "Raw binding: an `async def` host callable passed in `RunRequest.bindings`; pipeline: the "
        "binding awaits `ToolRegistry().invoke(name, args)` (default config: timeout policy and "
        "repeat reminder plugins) and returns the thawed value.",
        "Monty: externals passed as `external_lookup`; `max_suspensions` raised to 1,000,000 so "
        "1,000 calls fit. Its in-sandbox `time.perf_counter()` costs a host round trip, so monty "
        "is timed from outside only.",
        "The 130 ms target is checked on the median.",
    ]
    return section
