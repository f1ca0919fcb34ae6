"""Section 5: the heap cap — time to stop a program growing a list at a 256 MB cap.

The program appends 100,000-element lists (about 0.8 MB each) forever with
``max_heap_mb=256``. Measured: the run's time from ``run()`` called to returned, whether it
failed with kind ``memory``, and the host's own memory (RSS and peak RSS before and after
every run: the cap is the child's, so the host must not grow). Monty runs the same program
with ``ResourceLimits(max_memory=256 MiB)``.
"""

from __future__ import annotations

import resource
import time
from collections import Counter
from typing import Any

import psutil

from benchmarks._common import DSH, MONTY, Config, Row, Section, Unavailable
from benchmarks._peers import monty, monty_missing
from host.sandbox import SubprocessRuntime
from runtime import Limits, RunRequest

PROGRAM = "xs = []\nwhile True:\n    xs.append([0] * 100_000)\n"
CAP_MB = 256
WORKLOAD = f"growing list, {CAP_MB} MB heap cap"


def _rss_mb() -> float:
    return float(psutil.Process().memory_info().rss) / 2**20


def _peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


async def run(config: Config) -> Section:
    section = Section(
        "heap",
        "8. Heap cap",
        f"Milliseconds to stop a growing list at a {CAP_MB} MB heap cap; host memory unaffected.",
    )
    reps = config.n(2, 10)
    row = section.add(Row(WORKLOAD, DSH, "ms", {"value": []}))
    kinds: Counter[str] = Counter()
    rss_before, peak_before = _rss_mb(), _peak_mb()
    async with SubprocessRuntime() as rt:
        await rt.run(RunRequest(program="1"))
        rss_before, peak_before = _rss_mb(), _peak_mb()
        for _ in range(reps):
            t = time.perf_counter()
            r = await rt.run(
                RunRequest(program=PROGRAM, limits=Limits(max_heap_mb=CAP_MB, compute_ms=30_000))
            )
            elapsed = (time.perf_counter() - t) * 1000
            kinds[r.error.kind if r.error else "none"] += 1
            if r.error is not None and r.error.kind == "memory":
                row.metrics["value"].append(elapsed)
        rss_after, peak_after = _rss_mb(), _peak_mb()
    row.failures = reps - kinds["memory"]
    row.facts.update(
        stopped_as_memory=f"{kinds['memory']}/{reps}",
        error_kinds=dict(kinds),
        host_rss_mb_before=round(rss_before, 1),
        host_rss_mb_after=round(rss_after, 1),
        host_peak_rss_mb_before=round(peak_before, 1),
        host_peak_rss_mb_after=round(peak_after, 1),
    )
    row.note = (
        f"stopped as `memory`: {kinds['memory']}/{reps}; host RSS {rss_before:.0f} → "
        f"{rss_after:.0f} MB, host peak RSS {peak_before:.0f} → {peak_after:.0f} MB"
    )

    pm = monty()
    if pm is None:
        section.add(Unavailable(WORKLOAD, MONTY, "ms", monty_missing()))
    else:
        m_row = section.add(Row(WORKLOAD, MONTY, "ms", {"value": []}))
        m_kinds: Counter[str] = Counter()
        with pm.Monty() as pool:
            rss_before, peak_before = _rss_mb(), _peak_mb()
            for _ in range(reps):
                limits: Any = pm.ResourceLimits(
                    max_memory=CAP_MB * 2**20, max_feed_duration_secs=30
                )
                t = time.perf_counter()
                try:
                    with pool.checkout(limits=limits) as session:
                        session.feed_run(PROGRAM)
                    m_kinds["none"] += 1
                except Exception as exc:
                    kind = "MemoryError" if "MemoryError" in str(exc) else type(exc).__name__
                    m_kinds[kind] += 1
                    if kind == "MemoryError":
                        m_row.metrics["value"].append((time.perf_counter() - t) * 1000)
            rss_after, peak_after = _rss_mb(), _peak_mb()
        m_row.failures = reps - m_kinds["MemoryError"]
        m_row.facts.update(
            error_kinds=dict(m_kinds),
            host_rss_mb_before=round(rss_before, 1),
            host_rss_mb_after=round(rss_after, 1),
            host_peak_rss_mb_before=round(peak_before, 1),
            host_peak_rss_mb_after=round(peak_after, 1),
        )
        m_row.note = (
            f"stopped by MemoryError: {m_kinds['MemoryError']}/{reps}; host RSS "
            f"{rss_before:.0f} → {rss_after:.0f} MB, peak {peak_before:.0f} → {peak_after:.0f} MB"
        )
    section.notes.append(
        "dsh-code's cap is RLIMIT_DATA above the child's start (`Limits.max_heap_mb`); monty's is "
        "`ResourceLimits.max_memory` counted by its allocator. Host RSS is this process's."
    )
    return section
