"""Section 10: floods a program aims at the host (issue 12's figures), on ``SubprocessRuntime()``.

- 64 MiB in one line (``print("x" * (64 << 20))``, one byte past the default output cap with
  its newline) under ``max_wall_ms=3000``: the
  time from ``run()`` called to returned and the host's CPU over it (alone); then again with
  trivial runs back to back beside it on the same runtime, each one's latency, and the
  longest stall of the event loop (a task sleeping 1 ms in a loop: the most it woke late);
- a flood of tiny lines (``print("xy")`` forever: each line a new string object on the host,
  where a one-character line would be CPython's cached one) with the default caps, and a flood of
  queued calls (8,000 calls of 10 KB each to a binding that never answers, under a 3 s wall
  budget): the host's peak RSS growth over the run (``/proc/self/statm`` sampled every 2 ms
  by a thread, after ``gc.collect()`` and glibc's ``malloc_trim(0)`` so that memory freed by
  earlier runs is not silently reused) beside the bound that applies (the output cap,
  ``max_call_bytes``).
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import inspect
import os
import threading
import time
from collections import Counter
from typing import Any

import anyio

from benchmarks._common import DSH, Config, Row, Section, Target, host_cpu_ms, trivial_program
from host.sandbox import SubprocessRuntime
from runtime import Limits, RunRequest

__all__ = ("RssPeak", "run")

LINE = 'print("x" * (64 << 20))\n'
TINY = 'while True:\n    print("xy")\n'
CALLS = (
    "import asyncio\n"
    "pad = 'x' * 10_000\n"
    "tasks = [asyncio.ensure_future(tools.hang(pad=pad)) for _ in range(8000)]\n"
    "await asyncio.sleep(60)\n"
)
WALL_MS = 3000
ONE_LINE = f"64 MiB in one line, max_wall_ms={WALL_MS}"
_PAGE = os.sysconf("SC_PAGE_SIZE")


def _trim() -> None:
    """Give memory freed by earlier runs back to the OS (glibc), so the growth is this run's."""
    gc.collect()
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None).malloc_trim(0)


def _rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * _PAGE


class RssPeak:
    """The peak RSS of this process while the block runs, sampled by a thread."""

    def __init__(self, interval_s: float = 0.002) -> None:
        self.interval_s = interval_s
        self.before = self.peak = _rss()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        while not self._stop.wait(self.interval_s):
            self.peak = max(self.peak, _rss())

    def __enter__(self) -> RssPeak:
        _trim()
        self.before = self.peak = _rss()
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, _rss())

    @property
    def growth_mib(self) -> float:
        return (self.peak - self.before) / 2**20


async def _hang(args: Any) -> Any:
    await anyio.sleep(3600)


def _kind(r: Any) -> str:
    return r.error.kind if r.error is not None else "none"


async def _one_line_alone(rt: SubprocessRuntime, row: Row, kinds: Counter[str]) -> None:
    c, t = host_cpu_ms(), time.perf_counter()
    r = await rt.run(RunRequest(program=LINE, limits=Limits(max_wall_ms=WALL_MS)))
    row.metrics["value"].append((time.perf_counter() - t) * 1000)
    row.metrics["host CPU (ms)"].append(host_cpu_ms() - c)
    kinds[_kind(r)] += 1
    if r.error is None or r.error.kind not in ("budget", "output_limit"):
        row.failures += 1


async def _one_line_beside(
    rt: SubprocessRuntime, settle: Row, trivial: Row, stall: Row, kinds: Counter[str]
) -> None:
    done = anyio.Event()
    worst = [0.0]

    async def ticker() -> None:
        while not done.is_set():
            t = time.perf_counter()
            await anyio.sleep(0.001)
            worst[0] = max(worst[0], (time.perf_counter() - t) * 1000 - 1)

    async def trivial_runs() -> None:
        while not done.is_set():
            program, value = trivial_program()
            t = time.perf_counter()
            r = await rt.run(RunRequest(program=program))
            if r.error is None and r.value == value:
                trivial.metrics["value"].append((time.perf_counter() - t) * 1000)
            else:
                trivial.failures += 1

    async def flood() -> None:
        try:
            t = time.perf_counter()
            r = await rt.run(RunRequest(program=LINE, limits=Limits(max_wall_ms=WALL_MS)))
            settle.metrics["value"].append((time.perf_counter() - t) * 1000)
            kinds[_kind(r)] += 1
            if r.error is None or r.error.kind not in ("budget", "output_limit"):
                settle.failures += 1
        finally:
            done.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(ticker)
        tg.start_soon(trivial_runs)
        tg.start_soon(flood)
    stall.metrics["value"].append(worst[0])


async def _rss_of(rt: SubprocessRuntime, request: RunRequest, row: Row, cap: int) -> None:
    with RssPeak() as rss:
        r = await rt.run(request)
    row.metrics["value"].append(rss.growth_mib)
    row.metrics["growth / bound"].append(rss.growth_mib * 2**20 / cap)
    row.facts.setdefault("error_kinds", Counter())[_kind(r)] += 1
    row.facts["log_lines_kept"] = len(r.logs)
    if r.error is None:
        row.failures += 1


async def run(config: Config) -> Section:
    section = Section(
        "flood",
        "10. Floods aimed at the host",
        "A 64 MiB line under a 3 s wall budget (settle time, host CPU, what it does to runs "
        "beside it), and the host's RSS growth under floods of lines and of queued calls.",
        metric_names=["value", "host CPU (ms)", "growth / bound"],
    )
    reps = config.n(1, 3)
    alone = section.add(
        Row(
            f"{ONE_LINE}: run() called to returned, alone",
            DSH,
            "ms",
            {"value": [], "host CPU (ms)": []},
        )
    )
    settle = section.add(
        Row(f"{ONE_LINE}: run() called to returned, with runs beside it", DSH, "ms", {"value": []})
    )
    trivial = section.add(
        Row(f"{ONE_LINE}: trivial runs back to back beside it", DSH, "ms", {"value": []})
    )
    stall = section.add(
        Row(f"{ONE_LINE}: longest event-loop stall beside it", DSH, "ms", {"value": []})
    )
    defaults = Limits()
    tiny = section.add(
        Row(
            "flood of tiny lines (print('xy') forever), default caps: host RSS growth",
            DSH,
            "MiB",
            {"value": [], "growth / bound": []},
        )
    )
    queued = section.add(
        Row(
            "8,000 queued 10 KB calls to a binding that never answers: host RSS growth",
            DSH,
            "MiB",
            {"value": [], "growth / bound": []},
        )
    )
    kinds: Counter[str] = Counter()
    max_call_bytes = inspect.signature(SubprocessRuntime).parameters["max_call_bytes"].default
    async with SubprocessRuntime() as rt:
        await rt.run(RunRequest(program="1"))
        for _ in range(reps):
            await _one_line_alone(rt, alone, kinds)
            await _one_line_beside(rt, settle, trivial, stall, kinds)
            await _rss_of(rt, RunRequest(program=TINY), tiny, defaults.max_output_bytes)
            await _rss_of(
                rt,
                RunRequest(
                    program=CALLS,
                    bindings={"tools.hang": _hang},
                    limits=Limits(max_wall_ms=WALL_MS),
                ),
                queued,
                max_call_bytes,
            )
    alone.facts["error_kinds"] = settle.facts["error_kinds"] = dict(kinds)
    for row in (tiny, queued):
        row.facts["error_kinds"] = dict(row.facts.get("error_kinds", {}))
    alone.target = Target(
        "max",
        "<=",
        1000,
        metric="host CPU (ms)",
        what="host CPU for a 64 MiB line (containment)",
    )
    settle.target = Target(
        "max", "<=", WALL_MS + 50, what="a 64 MiB line settles within 3 s + 50 ms (containment)"
    )
    stall.target = Target(
        "max", "<=", 50, what="a run beside a 64 MiB line is not delayed by > 50 ms (containment)"
    )
    tiny.note = f"bound: the output cap, {defaults.max_output_bytes >> 20} MiB (Limits())"
    queued.note = f"bound: max_call_bytes, {max_call_bytes >> 20} MiB (SubprocessRuntime())"
    section.notes += [
        "The 64 MiB line and its newline pass the default output cap (64 MiB) by one byte; "
        "the run ends `output_limit` or `budget` (wall): either is a stop, anything else a "
        "failure (error kinds in the JSON facts).",
        "RSS growth: peak RSS of this process during the run minus RSS before it; growth / "
        "bound divides it by the cap that bounds what the host keeps.",
    ]
    return section
