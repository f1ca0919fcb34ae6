"""Section 7: scale — 50 concurrent runs on this machine, and 10,000 sequential trivial runs.

50 concurrent: 50 runs of a small program (one binding call, a 10k-iteration loop) started
at once with ``asyncio``-style concurrency (an anyio task group); latency is each run's time
from the burst's start to its result; failures are runs without the right value. Done with
``max_concurrent_runs=50`` (all 50 children alive at once) and the default (8, the rest
queue). Monty: 50 ``AsyncMonty`` checkouts + ``feed_run`` at once, with its default pool
(``max_processes`` = CPU count) and with ``max_processes=50``.

10,000 sequential: ``1 + 1`` one after another (quick: 300); throughput in runs per second,
per-run latency, and leaks: this process's open fds, live descendant processes (beyond the
template) and run directories left in a private temporary directory, before and after.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from typing import Any

import anyio
import psutil

from benchmarks._common import DSH, MONTY, Config, Row, Section, Unavailable, workdir_option
from benchmarks._peers import monty, monty_missing
from host.sandbox import SubprocessRuntime
from runtime import RunRequest

SMALL = "await tools.noop()\ntotal = 0\nfor i in range(10_000):\n    total += i\nreturn total"
MONTY_SMALL = "await noop()\ntotal = 0\nfor i in range(10_000):\n    total += i\ntotal"
EXPECTED = sum(range(10_000))
BURST = "50 concurrent runs (one call + 10k loop), latency from burst start"
SEQUENTIAL = "sequential trivial runs (1 + 1)"


async def noop(args: Any) -> Any:
    return None


def _fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def _descendants() -> int:
    return len(psutil.Process().children(recursive=True))


async def _burst_dsh(section: Section, config: Config, max_runs: int) -> None:
    row = section.add(
        Row(BURST, f"{DSH}, max_concurrent_runs={max_runs}", "ms", {"value": [], "burst (ms)": []})
    )
    failures = 0
    async with SubprocessRuntime(max_concurrent_runs=max_runs) as rt:
        await rt.run(RunRequest(program="1"))
        for _ in range(config.n(1, 5)):
            start = time.perf_counter()

            async def one(start: float) -> None:
                nonlocal failures
                r = await rt.run(RunRequest(program=SMALL, bindings={"tools.noop": noop}))
                row.metrics["value"].append((time.perf_counter() - start) * 1000)
                if r.value != EXPECTED:
                    failures += 1

            async with anyio.create_task_group() as tg:
                for _ in range(50):
                    tg.start_soon(one, start)
            row.metrics["burst (ms)"].append((time.perf_counter() - start) * 1000)
    row.facts["failures"] = failures
    row.note = f"failures: {failures}/{len(row.samples)}"


async def _burst_monty(section: Section, config: Config) -> None:
    pm = monty()
    if pm is None:
        section.add(Unavailable(BURST, MONTY, "ms", monty_missing()))
        return

    async def anoop(*args: Any, **kwargs: Any) -> None:
        return None

    for label, kwargs in (("default pool", {}), ("max_processes=50", {"max_processes": 50})):
        row = section.add(Row(BURST, f"{MONTY} ({label})", "ms", {"value": [], "burst (ms)": []}))
        failures = 0
        async with pm.AsyncMonty(**kwargs) as pool:
            for _ in range(config.n(1, 5)):
                start = time.perf_counter()

                async def one(row: Row, start: float) -> None:
                    nonlocal failures
                    try:
                        async with pool.checkout() as session:
                            value = await session.feed_run(
                                MONTY_SMALL, external_lookup={"noop": anoop}
                            )
                    except Exception:
                        value = None
                    row.metrics["value"].append((time.perf_counter() - start) * 1000)
                    failures += value != EXPECTED

                async with anyio.create_task_group() as tg:
                    for _ in range(50):
                        tg.start_soon(one, row, start)
                row.metrics["burst (ms)"].append((time.perf_counter() - start) * 1000)
        row.facts["failures"] = failures
        row.note = f"failures: {failures}/{len(row.samples)}"


async def _sequential_dsh(section: Section, n: int) -> None:
    row = section.add(Row(SEQUENTIAL, DSH, "ms", {"value": []}))
    shm = "/dev/shm" if os.access("/dev/shm", os.W_OK | os.X_OK) else None
    private = tempfile.mkdtemp(prefix="dsh-bench-runs-", dir=shm)
    saved = tempfile.tempdir
    options = workdir_option(private)
    if options is None:
        tempfile.tempdir = private  # run directories go here, so leftovers are ours to count
    failures = 0
    try:
        async with SubprocessRuntime(**(options or {})) as rt:
            await rt.run(RunRequest(program="1"))
            fds0, procs0, dirs0 = _fds(), _descendants(), len(os.listdir(private))
            t_all = time.perf_counter()
            for _ in range(n):
                t = time.perf_counter()
                r = await rt.run(RunRequest(program="1 + 1"))
                row.metrics["value"].append((time.perf_counter() - t) * 1000)
                failures += r.value != 2
            total = time.perf_counter() - t_all
            fds1, procs1, dirs1 = _fds(), _descendants(), len(os.listdir(private))
        procs_closed = _descendants()
    finally:
        tempfile.tempdir = saved
        shutil.rmtree(private, ignore_errors=True)
    row.facts.update(
        runs=n,
        failures=failures,
        runs_per_s=round(n / total, 1),
        fds_before=fds0,
        fds_after=fds1,
        descendants_before=procs0,
        descendants_after=procs1,
        descendants_after_close=procs_closed,
        run_dirs_before=dirs0,
        run_dirs_after=dirs1,
    )
    row.note = (
        f"{n / total:.0f} runs/s; failures {failures}; fds {fds0}→{fds1}; descendant processes "
        f"{procs0}→{procs1} (after close: {procs_closed}); run dirs {dirs0}→{dirs1}"
    )


def _sequential_monty(section: Section, n: int) -> None:
    pm = monty()
    if pm is None:
        section.add(Unavailable(SEQUENTIAL, MONTY, "ms", monty_missing()))
        return
    row = section.add(Row(SEQUENTIAL, f"{MONTY} (reused worker)", "ms", {"value": []}))
    failures = 0
    with pm.Monty() as pool:
        with pool.checkout() as session:
            session.feed_run("1")
        fds0, procs0 = _fds(), _descendants()
        t_all = time.perf_counter()
        for _ in range(n):
            t = time.perf_counter()
            with pool.checkout() as session:
                value = session.feed_run("1 + 1")
            row.metrics["value"].append((time.perf_counter() - t) * 1000)
            failures += value != 2
        total = time.perf_counter() - t_all
        fds1, procs1 = _fds(), _descendants()
    row.facts.update(
        runs=n,
        failures=failures,
        runs_per_s=round(n / total, 1),
        fds_before=fds0,
        fds_after=fds1,
        descendants_before=procs0,
        descendants_after=procs1,
    )
    row.note = (
        f"{n / total:.0f} runs/s; failures {failures}; fds {fds0}→{fds1}; worker processes "
        f"{procs0}→{procs1}"
    )


async def run(config: Config) -> Section:
    section = Section(
        "scale",
        "7. Scale",
        "50 runs at once on this machine (latency, failures); many sequential trivial runs "
        "(throughput, leaks).",
        metric_names=["value", "burst (ms)"],
    )
    await _burst_dsh(section, config, 50)
    await _burst_dsh(section, config, 8)
    await _burst_monty(section, config)
    n = config.n(300, 10_000)
    await _sequential_dsh(section, n)
    _sequential_monty(section, n)
    section.notes += [
        "burst (ms): time for the whole burst of 50 runs.",
        "Leaks are counted after the last run with the runtime still open (its template "
        "process and any pre-forked spare child are descendants) and again after closing it; "
        "run directories are counted in a private directory the runtime is pointed at.",
    ]
    return section
