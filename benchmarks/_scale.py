"""Section 7: scale — 50 concurrent runs on this machine, and 10,000 sequential trivial runs.

50 concurrent: 50 runs of a small program (one binding call, a 10k-iteration loop) started
at once with ``asyncio``-style concurrency (an anyio task group); latency is each run's time
from the burst's start to its result; failures are runs without the right value. Done with
``max_concurrent_runs=50`` (all 50 children alive at once) and the default (8, the rest
queue). Monty: 50 ``AsyncMonty`` checkouts + ``feed_run`` at once, with its default pool
(``max_processes`` = CPU count) and with ``max_processes=50``.

10,000 sequential: trivial runs (``f"{i} + 1"``, a new text each) one after another, back to
back (quick: 300); throughput in runs per second,
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

from benchmarks._common import DSH, MONTY, Config, Row, Section, Unavailable, trivial_program
from benchmarks._peers import monty, monty_missing
from host.sandbox import SubprocessRuntime
from runtime import RunRequest

SMALL = "await tools.noop()\ntotal = 0\nfor i in range(10_000):\n    total += i\nreturn total"
MONTY_SMALL = "await noop()\ntotal = 0\nfor i in range(10_000):\n    total += i\ntotal"
EXPECTED = sum(range(10_000))
BURST = "50 concurrent runs (one call + 10k loop), latency from burst start"
SEQUENTIAL = "sequential trivial runs, back to back"


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
                if r.error is None and r.value == EXPECTED:
                    row.metrics["value"].append((time.perf_counter() - start) * 1000)
                else:
                    failures += 1

            async with anyio.create_task_group() as tg:
                for _ in range(50):
                    tg.start_soon(one, start)
            row.metrics["burst (ms)"].append((time.perf_counter() - start) * 1000)
    row.failures = failures


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
                    if value == EXPECTED:
                        row.metrics["value"].append((time.perf_counter() - start) * 1000)
                    else:
                        failures += 1

                async with anyio.create_task_group() as tg:
                    for _ in range(50):
                        tg.start_soon(one, row, start)
                row.metrics["burst (ms)"].append((time.perf_counter() - start) * 1000)
        row.failures = failures


async def _sequential_dsh(section: Section, n: int) -> None:
    row = section.add(Row(SEQUENTIAL, DSH, "ms", {"value": []}))
    shm = "/dev/shm" if os.access("/dev/shm", os.W_OK | os.X_OK) else None
    private = tempfile.mkdtemp(prefix="dsh-bench-runs-", dir=shm)
    os.chmod(private, 0o711)  # searchable by the unprivileged uid programs run as on a root host
    failures = 0
    try:
        async with SubprocessRuntime(workdir_root=private) as rt:
            await rt.run(RunRequest(program="1"))
            fds0, procs0, dirs0 = _fds(), _descendants(), len(os.listdir(private))
            t_all = time.perf_counter()
            for _ in range(n):
                program, value = trivial_program()
                t = time.perf_counter()
                r = await rt.run(RunRequest(program=program))
                if r.error is None and r.value == value:
                    row.metrics["value"].append((time.perf_counter() - t) * 1000)
                else:
                    failures += 1
            total = time.perf_counter() - t_all
            fds1, procs1, dirs1 = _fds(), _descendants(), len(os.listdir(private))
        procs_closed = _descendants()
    finally:
        shutil.rmtree(private, ignore_errors=True)
    row.failures = failures
    row.facts.update(
        runs=n,
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
        f"{n / total:.0f} runs/s; fds {fds0}→{fds1}; descendant processes "
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
            program, expected = trivial_program()
            t = time.perf_counter()
            with pool.checkout() as session:
                value = session.feed_run(program)
            if value == expected:
                row.metrics["value"].append((time.perf_counter() - t) * 1000)
            else:
                failures += 1
        total = time.perf_counter() - t_all
        fds1, procs1 = _fds(), _descendants()
    row.failures = failures
    row.facts.update(
        runs=n,
        runs_per_s=round(n / total, 1),
        fds_before=fds0,
        fds_after=fds1,
        descendants_before=procs0,
        descendants_after=procs1,
    )
    row.note = f"{n / total:.0f} runs/s; fds {fds0}→{fds1}; worker processes {procs0}→{procs1}"


async def run(config: Config) -> Section:
    section = Section(
        "scale",
        "11. Scale",
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
        "Not interleaved: this section is about throughput and leaks, so each system runs its "
        "bursts and its sequential runs in one stretch (the 10,000 runs are back to back).",
        "Leaks are counted after the last run with the runtime still open (its template "
        "process and any pre-forked spare child are descendants) and again after closing it; "
        "run directories are counted in a private directory the runtime is pointed at.",
    ]
    return section
