"""The budget targets' rows: how long after a 100 ms budget ``run()`` returns, as monty is timed.

Interleaved in blocks of 5 repetitions (0.3 s apart), each run after a 2 ms pause: on
``SubprocessRuntime()`` a hot loop (``while True: pass``) under ``compute_ms=100``, a trivial
run, ``await asyncio.sleep(60)`` under ``max_wall_ms=100``, a trivial run; on a reused
pydantic-monty worker the hot loop under ``max_feed_duration_secs=0.1``, a trivial run, the
sleep under a caller's ``anyio.move_on_after(0.1)`` (monty's own limits exclude sleeps), a
trivial run.

- compute, over: ``run()`` returned - called - budget - the same system's trivial-run p50
  (the trivial run's time is start-up and settling, which a budget does not cover), beside
  the CPU billed (``stats.compute_ms``; for monty the worker's CPU clock over the feed);
- wall, over: ``run()`` returned - called - budget (the wall budget runs from ``run()``).
"""

from __future__ import annotations

import contextlib
import time
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
    host_cpu_ms,
    stat,
    trivial_program,
)
from benchmarks._peers import monty_missing, worker_cpu_ms
from host.sandbox import SubprocessRuntime
from runtime import Limits, RunRequest

__all__ = ("BUDGET_MS", "OVER", "PLAIN", "measure")

BUDGET_MS = 100
PAUSE_S = 0.002
BLOCK = 5
SETTLE_S = 0.3
OVER = "over (ms)"
PLAIN = "returned - called - budget (ms)"
BILLED = "billed CPU (ms)"
BILLED_OVER = "billed over (ms)"
HOST = "host CPU (ms)"

HOT = f"compute budget {BUDGET_MS} ms, Python hot loop: wall overshoot"
SLEEP = f"wall budget {BUDGET_MS} ms, asyncio.sleep(60): overshoot"
TRIVIAL = "trivial run beside them (subtracted from the compute overshoot)"


def _rows(section: Section, system: str) -> dict[str, Row]:
    names = {HOT: [OVER, BILLED, BILLED_OVER, HOST, PLAIN], SLEEP: [OVER, HOST, PLAIN]}
    rows = {w: section.add(Row(w, system, "ms", {m: [] for m in ms})) for w, ms in names.items()}
    rows[TRIVIAL] = section.add(Row(TRIVIAL, system, "ms", {OVER: []}))
    return rows


async def _dsh_rep(rt: SubprocessRuntime, rows: dict[str, Row], i: int) -> None:
    await anyio.sleep(PAUSE_S)
    request = RunRequest(
        program=f"# run {i}\nwhile True:\n    pass\n",
        limits=Limits(compute_ms=BUDGET_MS, max_wall_ms=10_000),
    )
    c, t = host_cpu_ms(), time.perf_counter()
    r = await rt.run(request)
    wall, host = (time.perf_counter() - t) * 1000, host_cpu_ms() - c
    row = rows[HOT]
    if r.error is not None and r.error.kind == "budget" and r.error.budget == "compute":
        row.metrics[PLAIN].append(wall - BUDGET_MS)
        row.metrics[HOST].append(host)
        if r.stats is not None:
            row.metrics[BILLED].append(r.stats.compute_ms)
            row.metrics[BILLED_OVER].append(r.stats.compute_ms - BUDGET_MS)
    else:
        row.failures += 1

    await _dsh_trivial(rt, rows[TRIVIAL])
    await anyio.sleep(PAUSE_S)
    request = RunRequest(
        program=f"# run {i}\nimport asyncio\nawait asyncio.sleep(60)\n",
        limits=Limits(max_wall_ms=BUDGET_MS),
    )
    c, t = host_cpu_ms(), time.perf_counter()
    r = await rt.run(request)
    wall, host = (time.perf_counter() - t) * 1000, host_cpu_ms() - c
    row = rows[SLEEP]
    if r.error is not None and r.error.kind == "budget" and r.error.budget == "wall":
        row.metrics[PLAIN].append(wall - BUDGET_MS)
        row.metrics[OVER].append(wall - BUDGET_MS)
        row.metrics[HOST].append(host)
    else:
        row.failures += 1
    await _dsh_trivial(rt, rows[TRIVIAL])


async def _dsh_trivial(rt: SubprocessRuntime, row: Row) -> None:
    await anyio.sleep(PAUSE_S)
    program, value = trivial_program()
    t = time.perf_counter()
    r = await rt.run(RunRequest(program=program))
    if r.error is None and r.value == value:
        row.metrics[OVER].append((time.perf_counter() - t) * 1000)
    else:
        row.failures += 1


def _monty_trivial(pool: Any, row: Row) -> None:
    time.sleep(PAUSE_S)
    program, value = trivial_program()
    t = time.perf_counter()
    try:
        with pool.checkout() as s:
            got = s.feed_run(program)
    except Exception as exc:
        got = exc
    if got == value:
        row.metrics[OVER].append((time.perf_counter() - t) * 1000)
    else:
        row.failures += 1


async def _monty_rep(pm: Any, pool: Any, apool: Any, rows: dict[str, Row]) -> None:
    time.sleep(PAUSE_S)
    row = rows[HOT]
    with pool.checkout(limits=pm.ResourceLimits(max_feed_duration_secs=BUDGET_MS / 1000)) as s:
        pid = s.worker_pid
        before = worker_cpu_ms(pid)
        c, t = host_cpu_ms(), time.perf_counter()
        stopped = False
        try:
            s.feed_run("while True:\n    pass\n")
        except Exception as exc:
            stopped = "TimeoutError" in str(exc) or type(exc).__name__ == "MontyCrashedError"
        wall, host = (time.perf_counter() - t) * 1000, host_cpu_ms() - c
        after = worker_cpu_ms(pid)
    if stopped:
        row.metrics[PLAIN].append(wall - BUDGET_MS)
        row.metrics[HOST].append(host)
        if before is not None and after is not None:
            row.metrics[BILLED].append(after - before)
            row.metrics[BILLED_OVER].append(after - before - BUDGET_MS)
    else:
        row.failures += 1

    _monty_trivial(pool, rows[TRIVIAL])
    await anyio.sleep(PAUSE_S)
    row = rows[SLEEP]
    c, t = host_cpu_ms(), time.perf_counter()
    with anyio.move_on_after(BUDGET_MS / 1000) as scope:
        async with apool.checkout() as s:
            await s.feed_run("import asyncio\nawait asyncio.sleep(60)\n")
    wall, host = (time.perf_counter() - t) * 1000, host_cpu_ms() - c
    if scope.cancelled_caught:
        row.metrics[PLAIN].append(wall - BUDGET_MS)
        row.metrics[OVER].append(wall - BUDGET_MS)
        row.metrics[HOST].append(host)
    else:
        row.failures += 1
    _monty_trivial(pool, rows[TRIVIAL])


def _settle(rows: dict[str, Row]) -> float | None:
    """Fill the compute row's ``over`` (plain minus the trivial p50); the trivial p50."""
    trivial = stat(rows[TRIVIAL], metric=OVER)
    if trivial is not None:
        rows[HOT].metrics[OVER] = [x - trivial for x in rows[HOT].metrics[PLAIN]]
    return trivial


async def measure(
    section: Section, config: Config, rt: SubprocessRuntime, pm: Any
) -> tuple[float, float | None]:
    """Add the target rows to ``section``; returns the trivial-run p50s (ms) of dsh-code
    and of monty (None without it)."""
    reps = config.n(5, 30)
    dsh = _rows(section, DSH)
    peer: dict[str, Row] | None = None
    async with contextlib.AsyncExitStack() as stack:
        if pm is None:
            for w in (HOT, SLEEP):
                section.add(Unavailable(w, MONTY, "ms", monty_missing()))
        else:
            peer = _rows(section, f"{MONTY} (reused worker)")
            pool = stack.enter_context(pm.Monty())
            apool = await stack.enter_async_context(pm.AsyncMonty())
        i = 0
        for _ in range(0, reps, BLOCK):
            # Blocks, not single runs, side by side: a monty worker replaced after a caller's
            # timeout keeps a CPU busy for a while, and would slow the next dsh-code run.
            for _ in range(BLOCK):
                i += 1
                await _dsh_rep(rt, dsh, i)
            await anyio.sleep(SETTLE_S)
            if peer is not None:
                for _ in range(BLOCK):
                    await _monty_rep(pm, pool, apool, peer)
                await anyio.sleep(SETTLE_S)
    trivial = _settle(dsh) or 0.0
    monty_trivial = _settle(peer) if peer is not None else None
    dsh[HOT].target = Target(
        "p50",
        "<=",
        2,
        metric=OVER,
        what=f"compute budget {BUDGET_MS} ms on a hot loop: wall overshoot",
        stretch=0.5,
        peer="; ".join(
            [
                figure(peer[HOT] if peer else None, "monty", metric=OVER),
                figure(dsh[HOT], "dsh-code billed CPU", metric=BILLED),
            ]
        ),
    )
    dsh[SLEEP].target = Target(
        "p50",
        "<=",
        2,
        metric=OVER,
        what="wall budget overshoot",
        peer=figure(peer[SLEEP] if peer else None, "monty (caller's timeout)", metric=OVER),
    )
    section.notes.append(
        f"Target rows ({HOT!r}, {SLEEP!r}): interleaved with monty in blocks of {BLOCK} "
        f"repetitions, {SETTLE_S:g} s apart, a 2 ms pause before each run; a trivial run "
        "after each budgeted one. Compute over = run() returned - called - budget - the same system's trivial-run "
        "p50; wall over = returned - called - budget (a wall budget runs from run() called). "
        "Monty's hot loop: `ResourceLimits(max_feed_duration_secs=0.1)`; its sleep: a caller's "
        "`anyio.move_on_after(0.1)` around checkout + feed_run. On a busy machine the hot "
        "loop gets less than a CPU, so it takes longer than the budget to burn the budget: "
        "the compute over counts that too (monty's limit is wall time, so its figure does not); "
        "the matrix's `settle over, estimate` column takes the burn rate out."
    )
    return trivial, monty_trivial
