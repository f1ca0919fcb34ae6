"""Section 2: binding calls, program -> host -> program, in both call styles.

Two paths on ``SubprocessRuntime()``: code mode's real binding path (a ``ToolRegistry``
with the tools, ``CodeMode(registry, runtime, CodeModeConfig(call_style=...))`` and its
``run_program``: validation, the sub-call scheduler, the dispatch events, with an observer
subscribed), and a raw binding (an ``async def`` in ``RunRequest.bindings``). Workloads:

- one awaited call (``await tools.noop()``) and one blocking call (``call_style="sync"``,
  ``tools.noop()``), each timed inside the program around every call (a distribution; the
  first 50 calls of a run are warm-up), and from outside as (T(N calls) - T(0)) / N, the
  only way to time monty (its in-sandbox clock is virtual);
- 1,000 no-op calls gathered with ``asyncio.gather`` (time for all);
- 10 concurrency-safe calls that each sleep 100 ms on the host: gathered (async style), and
  from a ``ThreadPoolExecutor(10)`` in the program (sync style).

Each repetition runs every system once, in turn (interleaved); pydantic-monty runs the same
loops with an async external function on ``AsyncMonty`` and a sync one on ``Monty``.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

import anyio

from benchmarks._common import (
    DSH,
    MONTY,
    Config,
    Row,
    Section,
    Target,
    Unavailable,
    figure,
    relative,
)
from benchmarks._peers import monty, monty_missing
from host.codemode import DISPATCH_EVENT, CodeMode, CodeModeConfig
from host.sandbox import SubprocessRuntime
from host.tools import ToolRegistry, define_tool
from runtime import CodeRuntime, RunRequest, RunResult

TIMED = (
    "# run {i}\n"
    "import time\n"
    "samples = []\n"
    "for _ in range({n}):\n"
    "    t = time.perf_counter()\n"
    "    {call}\n"
    "    samples.append((time.perf_counter() - t) * 1e6)\n"
    "return samples[50:]\n"
)
LOOP = "# run {i}\nfor _ in range({n}):\n    {call}\nreturn 1\n"
GATHER = (
    "# run {i}\n"
    "import asyncio, time\n"
    "t = time.perf_counter()\n"
    "await asyncio.gather(*[tools.{name}() for _ in range({n})])\n"
    "return (time.perf_counter() - t) * 1000\n"
)
THREADS = (
    "# run {i}\n"
    "import time\n"
    "from concurrent.futures import ThreadPoolExecutor\n"
    "t = time.perf_counter()\n"
    "with ThreadPoolExecutor(10) as pool:\n"
    "    list(pool.map(lambda _: tools.slow(), range(10)))\n"
    "return (time.perf_counter() - t) * 1000\n"
)
MONTY_LOOP = "for _ in range({n}):\n    {call}\n1"
MONTY_GATHER = "import asyncio\nawait asyncio.gather(*[{name}() for _ in range({n})])\n1"

AWAITED = "one awaited binding call, timed in the program"
BLOCKING = 'one blocking binding call (call_style="sync"), timed in the program'
AWAITED_OUT = "one awaited binding call, from outside: (T(N calls) - T(0)) / N"
BLOCKING_OUT = "one blocking binding call, from outside: (T(N calls) - T(0)) / N"
GATHER_1000 = "1,000 no-op calls gathered"
GATHER_SLOW = "10 concurrency-safe 100 ms calls gathered (async style)"
THREAD_SLOW = "10 concurrency-safe 100 ms calls from a thread pool (sync style)"
ORDER = (AWAITED, AWAITED_OUT, BLOCKING, BLOCKING_OUT, GATHER_1000, GATHER_SLOW, THREAD_SLOW)

CODEMODE = f"{DSH}, code mode (ToolRegistry + CodeMode)"
RAW = f"{DSH}, raw binding"
MONTY_ASYNC = f"{MONTY} (AsyncMonty, async external function)"
MONTY_SYNC = f"{MONTY} (Monty, sync external function)"

Runner = Callable[[str], Awaitable[RunResult]]


class _Dsh:
    """One way of running programs with ``tools.noop`` and ``tools.slow`` in one style."""

    def __init__(self, rt: CodeRuntime, style: str, codemode: bool) -> None:
        self.style = style
        self.events = 0
        if codemode:
            registry = ToolRegistry()

            async def execute_noop(args: Any, ctx: Any) -> Any:
                return None

            async def execute_slow(args: Any, ctx: Any) -> Any:
                await anyio.sleep(0.1)
                return None

            registry.register(
                define_tool(
                    name="noop", description="Do nothing.", parameters={}, execute=execute_noop
                )
            )
            registry.register(
                define_tool(
                    name="slow",
                    description="Sleep 100 ms.",
                    parameters={},
                    execute=execute_slow,
                    concurrency_safe=True,
                )
            )
            registry.on(DISPATCH_EVENT, self._count)
            mode = CodeMode(registry, rt, CodeModeConfig(call_style=style))  # type: ignore[arg-type]
            self.run: Runner = mode.run_program
        else:

            async def noop(args: Any) -> Any:
                return None

            async def slow(args: Any) -> Any:
                await anyio.sleep(0.1)
                return None

            bindings = {"tools.noop": noop, "tools.slow": slow}

            async def raw(program: str) -> RunResult:
                return await rt.run(
                    RunRequest(program=program, bindings=bindings, call_style=style)  # type: ignore[arg-type]
                )

            self.run = raw

    def _count(self, payload: object) -> None:
        self.events += 1

    @property
    def call(self) -> str:
        return "await tools.noop()" if self.style == "async" else "tools.noop()"


def _rows(section: Section, system: str, workloads: tuple[str, ...]) -> dict[str, Row]:
    units = {GATHER_1000: "ms", GATHER_SLOW: "ms", THREAD_SLOW: "ms"}
    return {w: section.add(Row(w, system, units.get(w, "µs"), {"value": []})) for w in workloads}


async def _timed(dsh: _Dsh, row: Row, n: int, i: int) -> None:
    r = await dsh.run(TIMED.format(i=i, n=n, call=dsh.call))
    if r.error is None and isinstance(r.value, list):
        row.metrics["value"] += [float(x) for x in r.value]
    else:
        row.failures += 1


async def _outside(dsh: _Dsh, row: Row, n: int, i: int) -> None:
    t = time.perf_counter()
    r_n = await dsh.run(LOOP.format(i=i, n=n, call=dsh.call))
    t_n = time.perf_counter() - t
    t = time.perf_counter()
    r_0 = await dsh.run(LOOP.format(i=i, n=0, call=dsh.call))
    t_0 = time.perf_counter() - t
    if r_n.value == 1 and r_0.value == 1:
        row.metrics["value"].append((t_n - t_0) / n * 1e6)
    else:
        row.failures += 1


async def _in_program_ms(dsh: _Dsh, row: Row, program: str) -> None:
    r = await dsh.run(program)
    if r.error is None and isinstance(r.value, float):
        row.metrics["value"].append(r.value)
    else:
        row.failures += 1


class _Monty:
    """pydantic-monty running the same loops (timed from outside), or None when missing."""

    def __init__(self, pm: Any, apool: Any, spool: Any) -> None:
        self.limits = pm.ResourceLimits(max_suspensions=1_000_000)
        self.apool, self.spool = apool, spool

    async def feed(self, code: str, lookup: dict[str, Any]) -> tuple[float, bool]:
        t = time.perf_counter()
        try:
            async with self.apool.checkout(limits=self.limits) as session:
                await session.feed_run(code, external_lookup=lookup)
        except Exception:
            return time.perf_counter() - t, False
        return time.perf_counter() - t, True

    def feed_sync(self, code: str, lookup: dict[str, Any]) -> tuple[float, bool]:
        t = time.perf_counter()
        try:
            with self.spool.checkout(limits=self.limits) as session:
                session.feed_run(code, external_lookup=lookup)
        except Exception:
            return time.perf_counter() - t, False
        return time.perf_counter() - t, True


async def _anoop(*args: Any, **kwargs: Any) -> None:
    return None


async def _aslow(*args: Any, **kwargs: Any) -> None:
    await asyncio.sleep(0.1)


def _snoop(*args: Any, **kwargs: Any) -> None:
    return None


async def _monty_rep(m: _Monty, rows: dict[str, dict[str, Row]], n: int) -> None:
    a, s = rows[MONTY_ASYNC], rows[MONTY_SYNC]
    t_n, ok_n = await m.feed(MONTY_LOOP.format(n=n, call="await noop()"), {"noop": _anoop})
    t_0, ok_0 = await m.feed(MONTY_LOOP.format(n=0, call="await noop()"), {"noop": _anoop})
    if ok_n and ok_0:
        a[AWAITED_OUT].metrics["value"].append((t_n - t_0) / n * 1e6)
    else:
        a[AWAITED_OUT].failures += 1
    t_n, ok_n = m.feed_sync(MONTY_LOOP.format(n=n, call="noop()"), {"noop": _snoop})
    t_0, ok_0 = m.feed_sync(MONTY_LOOP.format(n=0, call="noop()"), {"noop": _snoop})
    if ok_n and ok_0:
        s[BLOCKING_OUT].metrics["value"].append((t_n - t_0) / n * 1e6)
    else:
        s[BLOCKING_OUT].failures += 1
    empty, ok_e = await m.feed(MONTY_GATHER.format(name="noop", n=0), {"noop": _anoop})
    for workload, name, count, fn in (
        (GATHER_1000, "noop", 1000, _anoop),
        (GATHER_SLOW, "slow", 10, _aslow),
    ):
        took, ok = await m.feed(MONTY_GATHER.format(name=name, n=count), {name: fn})
        if ok and ok_e:
            a[workload].metrics["value"].append((took - empty) * 1000)
        else:
            a[workload].failures += 1


async def run(config: Config) -> Section:
    section = Section(
        "calls",
        "2. Binding calls",
        "Cost of calling the host from a program, awaited and blocking, through code mode and "
        "raw: one call, 1,000 gathered, 10 slow ones gathered or from threads.",
    )
    reps = config.n(2, 8)
    n_timed, n_loop = config.n(300, 1000), config.n(200, 1000)
    pm = monty()
    rows: dict[str, dict[str, Row]] = {}
    async with SubprocessRuntime() as rt:
        await rt.run(RunRequest(program="1"))
        ways = {
            CODEMODE: (_Dsh(rt, "async", True), _Dsh(rt, "sync", True)),
            RAW: (_Dsh(rt, "async", False), _Dsh(rt, "sync", False)),
        }
        for system in ways:
            rows[system] = _rows(section, system, ORDER)
        m: _Monty | None = None
        if pm is None:
            for system, workloads in (
                (MONTY_ASYNC, (AWAITED_OUT, GATHER_1000, GATHER_SLOW)),
                (MONTY_SYNC, (BLOCKING_OUT,)),
            ):
                for w in workloads:
                    section.add(
                        Unavailable(w, system, "ms" if "gathered" in w else "µs", monty_missing())
                    )
        else:
            rows[MONTY_ASYNC] = _rows(section, MONTY_ASYNC, (AWAITED_OUT, GATHER_1000, GATHER_SLOW))
            rows[MONTY_SYNC] = _rows(section, MONTY_SYNC, (BLOCKING_OUT,))
        async with _monty_pools(pm) as pools:
            if pools is not None:
                m = _Monty(pm, *pools)
            i = 0
            for _ in range(reps):
                for system, (a, s) in ways.items():
                    r = rows[system]
                    i += 1
                    await _timed(a, r[AWAITED], n_timed, i)
                    await _timed(s, r[BLOCKING], n_timed, i)
                    await _outside(a, r[AWAITED_OUT], n_loop, i)
                    await _outside(s, r[BLOCKING_OUT], n_loop, i)
                    gather = GATHER.format(i=i, name="noop", n=1000)
                    await _in_program_ms(a, r[GATHER_1000], gather)
                    slow = GATHER.format(i=i, name="slow", n=10)
                    await _in_program_ms(a, r[GATHER_SLOW], slow)
                    await _in_program_ms(s, r[THREAD_SLOW], THREADS.format(i=i))
                if m is not None:
                    await _monty_rep(m, rows, n_loop)
        events = {system: a.events + s.events for system, (a, s) in ways.items()}
    _finish(section, rows, events)
    section.rows.sort(key=lambda r: ORDER.index(r.workload))
    return section


def _monty_pools(pm: Any) -> Any:
    """An async context giving (AsyncMonty pool, Monty pool), or None without monty."""
    from contextlib import asynccontextmanager

    @asynccontextmanager
    async def pools() -> Any:
        if pm is None:
            yield None
            return
        async with pm.AsyncMonty() as apool:
            with pm.Monty() as spool:
                yield apool, spool

    return pools()


def _finish(section: Section, rows: dict[str, dict[str, Row]], events: dict[str, int]) -> None:
    cm = rows[CODEMODE]
    m_async = rows.get(MONTY_ASYNC, {}).get(AWAITED_OUT)
    m_sync = rows.get(MONTY_SYNC, {}).get(BLOCKING_OUT)
    cm[AWAITED].target = relative(
        Target(
            "p50",
            "<=",
            None,
            what="one awaited binding call, in the program (code mode)",
            peer="; ".join(
                [
                    figure(m_async, "monty, async external, per call from outside"),
                    figure(cm[AWAITED_OUT], "dsh-code code mode from outside"),
                    figure(rows[RAW][AWAITED], "dsh-code raw binding"),
                ]
            ),
        ),
        0.5,
        m_async,
        "monty's per call (async external function)",
    )
    cm[BLOCKING].target = Target(
        "p50",
        "<=",
        30,
        what="one blocking binding call (code mode)",
        peer="; ".join(
            [
                figure(m_sync, "monty, sync external, per call from outside"),
                figure(rows[RAW][BLOCKING], "dsh-code raw binding"),
            ]
        ),
    )
    m_slow = rows.get(MONTY_ASYNC, {}).get(GATHER_SLOW)
    for workload, what in (
        (GATHER_SLOW, "10 x 100 ms concurrency-safe calls gathered (code mode)"),
        (THREAD_SLOW, "10 x 100 ms concurrency-safe calls from a thread pool (code mode)"),
    ):
        cm[workload].target = Target(
            "p50", "<=", 130, what=what, peer=figure(m_slow, "monty gathered")
        )
    section.notes += [
        "Code mode: the programs run through `CodeMode.run_program`, whose bindings dispatch "
        "each call through the registry's pipeline and the sub-call scheduler and emit the "
        f"dispatch events (observed: {events.get(CODEMODE, 0)} `{DISPATCH_EVENT}` events). "
        "`tools.slow` is defined with `concurrency_safe=True`.",
        "Raw binding: an `async def` host callable in `RunRequest.bindings`, with the same "
        "`call_style`.",
        "Timed inside the program with `time.perf_counter()` around each call; from outside, "
        "(T(N) - T(0)) / N over two runs. Monty is timed from outside only: its in-sandbox "
        "clock is virtual. `max_suspensions` is raised so 1,000 calls fit.",
    ]
