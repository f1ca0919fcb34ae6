"""Section 1: a trivial program end to end (``1 + 1``), from ``run()`` called to result back.

Systems: a child forked ahead of time (when the runtime has that option), a fresh child
forked from the template process (the default), a direct ``python -c pass`` spawn, in-process
``exec`` of the compiled program (the floor), and pydantic-monty with a reused worker and
with a fresh worker per session (``max_checkouts_per_worker=1``).
"""

from __future__ import annotations

import subprocess
import sys
import time
from typing import Any

import anyio

from benchmarks._common import (
    DSH_PREFORK,
    DSH_TEMPLATE,
    FLOOR,
    MONTY,
    Config,
    Row,
    Section,
    Target,
    Unavailable,
    has_runtime_option,
    isolation_levels,
    prefork_option,
    template_option,
)
from benchmarks._peers import monty, monty_missing
from host.sandbox import SubprocessRuntime
from runtime import RunRequest

PROGRAM = "1 + 1"
GAP_S = 0.002
WORKLOAD = "trivial program (1 + 1), end to end"


async def _dsh(section: Section, system: str, runs: int, target: Target, **options: Any) -> None:
    row = section.add(Row(WORKLOAD, system, "ms", {"value": []}, target=target))
    failures = 0
    async with SubprocessRuntime(**options) as rt:
        for i in range(runs + 20):
            await anyio.sleep(GAP_S)
            t = time.perf_counter()
            r = await rt.run(RunRequest(program=PROGRAM))
            elapsed = (time.perf_counter() - t) * 1000
            if i < 20:
                continue  # warm-up: template start, first forks
            if r.value != 2:
                failures += 1
            row.metrics["value"].append(elapsed)
    row.facts["failures"] = failures
    row.facts["warmup_runs"] = 20


def _monty(section: Section, runs: int) -> None:
    pm = monty()
    for label, kwargs in (
        ("reused worker", {}),
        ("fresh worker per session", {"max_checkouts_per_worker": 1}),
    ):
        system = f"{MONTY} ({label})"
        if pm is None:
            section.add(Unavailable(WORKLOAD, system, "ms", monty_missing()))
            continue
        row = section.add(Row(WORKLOAD, system, "ms", {"value": []}))
        failures = 0
        with pm.Monty(**kwargs) as pool:
            for i in range(runs + 20):
                time.sleep(GAP_S)
                t = time.perf_counter()
                with pool.checkout() as session:
                    value = session.feed_run(PROGRAM)
                elapsed = (time.perf_counter() - t) * 1000
                if i < 20:
                    continue
                failures += value != 2
                row.metrics["value"].append(elapsed)
        row.facts["failures"] = failures


async def run(config: Config) -> Section:
    section = Section(
        "startup",
        "1. Trivial program end to end",
        "Milliseconds from calling run() to having the result of `1 + 1`, one run at a time.",
    )
    runs = config.n(40, 500)
    prefork = prefork_option()
    for level in isolation_levels():
        extra: dict[str, Any] = {} if level is None else {"isolation": level}
        suffix = "" if level is None else f", isolation={level}"
        columns: list[tuple[str, dict[str, Any] | None, Target]] = [
            (DSH_PREFORK, prefork, Target("p50", "<=", 0.3)),
            (DSH_TEMPLATE, template_option(), Target("p50", "<=", 1.5)),
        ]
        for name, options, target in columns:
            system = name[:-1] + suffix + ")"
            if options is None:
                why = (
                    "not available: SubprocessRuntime has no pre-fork option yet (feature-detected)"
                )
                section.add(Unavailable(WORKLOAD, system, "ms", why, target))
                continue
            try:
                await _dsh(section, system, runs, target, **options, **extra)
            except Exception as exc:  # e.g. namespaces not available on this machine
                section.rows = [r for r in section.rows if r.system != system]
                why = f"not available: {type(exc).__name__}: {exc}"
                section.add(Unavailable(WORKLOAD, system, "ms", why, target))
    if prefork is not None and has_runtime_option("use_cgroups"):
        # What per-run cgroups cost, measured beside the default (which uses them if it may).
        system = DSH_PREFORK[:-1] + ", isolation=auto, use_cgroups=False)"
        await _dsh(section, system, runs, Target("p50", "<=", 0.3), **prefork, use_cgroups=False)
    section.notes.append(
        f"Pre-forked child: SubprocessRuntime(**{prefork!r}); template fork: "
        f"SubprocessRuntime(**{template_option()!r})"
        + ("; each at both isolation levels." if isolation_levels()[0] else ".")
    )

    spawn = section.add(Row(WORKLOAD, "python -c pass (direct spawn)", "ms", {"value": []}))
    for _ in range(config.n(10, 100)):
        t = time.perf_counter()
        subprocess.run([sys.executable, "-c", "pass"], check=True)
        spawn.metrics["value"].append((time.perf_counter() - t) * 1000)

    floor = section.add(Row(WORKLOAD, f"{FLOOR} exec (floor)", "ms", {"value": []}))
    code = compile(PROGRAM, "<program>", "exec")
    for _ in range(runs):
        t = time.perf_counter()
        exec(code, {})
        floor.metrics["value"].append((time.perf_counter() - t) * 1000)

    _monty(section, runs)
    section.notes += [
        f"Each run follows an untimed {GAP_S * 1000:g} ms pause (for pools that refill in the "
        "background); the first 20 runs of each system are warm-up and not counted.",
        "Monty: a pool `Monty()` made once; each run is `with pool.checkout(): "
        "session.feed_run('1 + 1')`. The fresh-worker column sets `max_checkouts_per_worker=1`, "
        "so the pool replaces the worker after every session (in the background).",
    ]
    return section
