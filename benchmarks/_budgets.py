"""Section 4: budget enforcement — is the program stopped, how late, and at what host cost.

First the target rows (``_overshoot``: a 100 ms compute budget on a hot loop and a 100 ms
wall budget on a sleep, interleaved with pydantic-monty, with a trivial run of each system
beside them). Then the matrix: compute budgets (50, 100, 500, 1000 ms; quick: 50, 100) against: a Python hot loop; hot
loops inside C (a huge integer power, a catastrophic regex); a busy thread hidden behind an
awaited binding (the main thread waits on a host call that sleeps for a minute); a program
that forks two busy children and waits for them. Wall budgets against ``asyncio.sleep``, a
blocking syscall (``os.read`` on a pipe nobody writes) and a process that stops itself
(``SIGSTOP``).

Per run:
- stopped: the run failed with kind ``budget`` and the right ``budget`` (compute / wall); a
  run that was not is a failure (counted, in no metric);
- over: compute, ``run()`` returned - called - budget - the trivial-run p50 of the target
  rows (as monty is timed); wall, ``run()`` returned - called - budget;
- billed CPU (compute): ``stats.compute_ms``;
- billed over (compute): ``stats.compute_ms - budget``, CPU the tree used past the budget;
- settle over (compute): wall time from the moment the tree's CPU crossed the budget to
  ``run()`` returning. The program reports, through a binding call just before it starts
  burning, ``t0 = clock_gettime(CLOCK_MONOTONIC)`` (the same clock as the host's) and
  ``c0 = process_time()``. At a full-speed burn (1 core for one busy thread, min(2, nproc)
  for two busy children) the crossing is ``t0 + (budget - c0) / rate``: an upper bound of
  the overshoot, since contention only slows the burn and moves the real crossing later. The
  estimate uses the burn rate actually achieved, ``(compute_ms - c0) / (settle - t0)``;
- settle over (wall): ``run()`` returned minus (called + budget);
- host CPU: this process's CPU time (every thread) over the run — start, policing, settle,
  clean-up — minus what an idle wait of the same length costs (measured per budget).
"""

from __future__ import annotations

import statistics
import time
from collections import Counter
from dataclasses import replace
from typing import Any

import anyio

from benchmarks import _overshoot
from benchmarks._common import (
    DSH,
    MONTY,
    Config,
    Row,
    Section,
    Unavailable,
    figure,
    host_cpu_ms,
    mono,
)
from benchmarks._overshoot import OVER, PLAIN
from benchmarks._peers import monty, monty_missing, worker_cpu_ms
from host.sandbox import SubprocessRuntime
from runtime import Limits, RunRequest, RunResult

#: The program's CPU is counted from its first line, as the run's compute is (from the child's
#: Ready): process_time() alone would add the child's own set-up and warm-up.
PROLOGUE = "import time\n_c_start = time.process_time()\n"
MARK = (
    "await bench.mark(t=time.clock_gettime(time.CLOCK_MONOTONIC), "
    "c=(time.process_time() - _c_start) * 1000)\n"
)

#: name -> (program, nominal burn rate in CPUs, monty program or None)
COMPUTE: dict[str, tuple[str, int, str | None]] = {
    "Python hot loop": (
        "import time\n" + MARK + "while True:\n    pass\n",
        1,
        "while True:\n    pass\n",
    ),
    "C: huge integer power (7 ** 10**7)": (
        "import time\nb = 7\ne = 10 ** 7\n" + MARK + "x = b ** e\n",
        1,
        "b = 7\ne = 10 ** 7\nx = b ** e\n",
    ),
    "C: catastrophic regex ((a+)+$)": (
        "import re, time\ns = 'a' * 40 + 'b'\n" + MARK + "re.match(r'(a+)+$', s)\n",
        1,
        "import re\ns = 'a' * 40 + 'b'\nre.match(r'(a+)+$', s)\n",
    ),
    "busy thread behind an awaited binding": (
        "import threading, time\n"
        "def burn():\n    while True:\n        pass\n"
        "th = threading.Thread(target=burn, daemon=True)\n"
        + MARK
        + "th.start()\nawait bench.wait()\n",
        1,
        None,
    ),
    "forks 2 busy children": (
        "import os, time\n" + MARK + "for _ in range(2):\n"
        "    if os.fork() == 0:\n"
        "        while True:\n            pass\n"
        "while True:\n"
        "    try:\n        os.wait()\n"
        "    except ChildProcessError:\n        break\n",
        2,
        None,
    ),
}

#: name -> (program, monty program or None)
WALL: dict[str, tuple[str, str | None]] = {
    "wall: asyncio.sleep(60)": (
        "import asyncio\nawait asyncio.sleep(60)\n",
        "import asyncio\nawait asyncio.sleep(60)\n",
    ),
    "wall: blocking syscall (os.read on an empty pipe)": (
        "import os\nr, w = os.pipe()\nos.read(r, 1)\n",
        None,
    ),
    "wall: self-stopped process (SIGSTOP)": (
        "import os, signal\nos.kill(os.getpid(), signal.SIGSTOP)\nreturn os.getpid()\n",
        None,
    ),
    "wall: stopped child (fork + SIGSTOP), parent in waitpid": (
        "import os, signal\n"
        "pid = os.fork()\n"
        "if pid == 0:\n"
        "    os.kill(os.getpid(), signal.SIGSTOP)\n"
        "    os._exit(0)\n"
        "os.waitpid(pid, 0)\n",
        None,
    ),
}

ESTIMATE = "settle over, estimate (ms)"
UPPER = "settle over, upper bound (ms)"
BILLED = "billed CPU (ms)"
BILLED_OVER = "billed over (ms)"
HOST = "host CPU (ms)"
#: The table's columns (the upper bound and the plain figure are in the JSON only).
METRICS = [OVER, BILLED, BILLED_OVER, ESTIMATE, HOST]


def _row(section: Section, workload: str, budget: int, kind: str, system: str) -> Row:
    row = Row(
        f"{workload} — {budget} ms {kind} budget",
        system,
        "ms",
        {name: [] for name in [*METRICS, UPPER, PLAIN]},
    )
    row.facts.update(budget_ms=budget, budget_kind=kind, workload=workload, stopped=0, runs=0)
    row.facts["error_kinds"] = Counter[str]()
    return section.add(row)


def _finish(row: Row, trivial_ms: float) -> None:
    if row.facts["budget_kind"] == "compute":
        row.metrics[OVER] = [x - trivial_ms for x in row.metrics[PLAIN]]
    else:
        row.metrics[OVER] = list(row.metrics[PLAIN])
    row.failures = row.facts["runs"] - row.facts["stopped"]
    row.facts["stopped"] = f"{row.facts['stopped']}/{row.facts['runs']}"
    row.facts["error_kinds"] = dict(row.facts["error_kinds"])
    for name in list(row.metrics):
        if not row.metrics[name]:
            del row.metrics[name]


class Idle:
    """Host CPU of an idle wait as a line ``a + b * ms`` fitted to measured idle waits."""

    def __init__(self, samples: list[tuple[float, float]]) -> None:
        xs = [x for x, _ in samples]
        ys = [y for _, y in samples]
        mx, my = statistics.fmean(xs), statistics.fmean(ys)
        var = sum((x - mx) ** 2 for x in xs)
        self.b = sum((x - mx) * (y - my) for x, y in samples) / var if var else 0.0
        self.a = my - self.b * mx
        self.samples = samples

    def cost(self, wall_ms: float) -> float:
        """Host CPU ms an idle wait of ``wall_ms`` costs (never negative)."""
        return max(self.a + self.b * wall_ms, 0.0)

    def text(self) -> str:
        return f"{self.a:.3f} ms + {self.b * 1000:.3f} ms per s of wait"


async def _baseline(lengths: list[int]) -> Idle:
    """Host CPU of idle ``anyio.sleep`` waits of each length (ms), three times each."""
    samples: list[tuple[float, float]] = []
    for _ in range(3):
        for length in lengths:
            c, t = host_cpu_ms(), time.perf_counter()
            await anyio.sleep(length / 1000)
            samples.append(((time.perf_counter() - t) * 1000, host_cpu_ms() - c))
    return Idle(samples)


async def _timed_run(
    rt: SubprocessRuntime, row: Row, request: RunRequest, budget: str, idle: Idle
) -> tuple[RunResult, bool, float, float]:
    """Run ``request`` and count it in ``row`` (runs, error kinds, stopped by the ``budget``
    named, host CPU); returns the result, whether it was so stopped, called and returned."""
    c_start, t_call = host_cpu_ms(), mono()
    r = await rt.run(request)
    t_return = mono()
    host = host_cpu_ms() - c_start - idle.cost((t_return - t_call) * 1000)
    row.facts["runs"] += 1
    row.facts["error_kinds"][r.error.kind if r.error else "none"] += 1
    stopped = r.error is not None and r.error.kind == "budget" and r.error.budget == budget
    row.facts["stopped"] += stopped
    if stopped:
        row.metrics[HOST].append(host)
    return r, stopped, t_call, t_return


async def _dsh_compute(
    rt: SubprocessRuntime, row: Row, *, program: str, rate: int, budget: int, idle: Idle, nproc: int
) -> None:
    marks: list[dict[str, float]] = []

    async def mark(args: Any) -> None:
        marks.append(args)

    async def wait(args: Any) -> None:
        await anyio.sleep(60)

    request = RunRequest(
        program=PROLOGUE + program,
        bindings={"bench.mark": mark, "bench.wait": wait},
        limits=Limits(compute_ms=budget, max_wall_ms=budget * 20 + 10_000),
    )
    r, stopped, t_call, t_return = await _timed_run(rt, row, request, "compute", idle)
    if r.stats is None or not stopped:
        return
    billed = r.stats.compute_ms
    row.metrics[PLAIN].append((t_return - t_call) * 1000 - budget)
    row.metrics[BILLED].append(billed)
    row.metrics[BILLED_OVER].append(billed - budget)
    if not marks:
        row.facts["no_mark"] = row.facts.get("no_mark", 0) + 1
        return
    t0, c0 = float(marks[0]["t"]), float(marks[0]["c"])
    full = min(rate, nproc)
    crossing_upper = t0 + (budget - c0) / full / 1000
    row.metrics[UPPER].append((t_return - crossing_upper) * 1000)
    t_settle = t_call + r.stats.wall_ms / 1000
    achieved = (billed - c0) / ((t_settle - t0) * 1000) if t_settle > t0 else 0.0
    if achieved > 0:
        crossing = t0 + (budget - c0) / min(achieved, full) / 1000
        row.metrics[ESTIMATE].append((t_return - crossing) * 1000)
        row.facts.setdefault("burn_rates", []).append(round(achieved, 3))


async def _dsh_wall(rt: SubprocessRuntime, row: Row, program: str, budget: int, idle: Idle) -> None:
    request = RunRequest(program=program, limits=Limits(max_wall_ms=budget))
    r, stopped, t_call, t_return = await _timed_run(rt, row, request, "wall", idle)
    if r.error is None and isinstance(r.value, int):
        row.facts.setdefault("returned_pids", []).append(r.value)
    if stopped:
        over = (t_return - (t_call + budget / 1000)) * 1000
        row.metrics[PLAIN].append(over)
        row.metrics[ESTIMATE].append(over)
        row.metrics[UPPER].append(over)


def _monty_compute(pool: Any, pm: Any, row: Row, *, program: str, budget: int, idle: Idle) -> None:
    limits = pm.ResourceLimits(max_feed_duration_secs=budget / 1000)
    with pool.checkout(limits=limits) as session:
        pid = session.worker_pid
        cpu_before = worker_cpu_ms(pid)
        c_start, t_call = host_cpu_ms(), mono()
        error: BaseException | None = None
        try:
            session.feed_run(program)
        except Exception as exc:
            error = exc
        t_return = mono()
        cpu_after = worker_cpu_ms(pid)
    host = host_cpu_ms() - c_start - idle.cost((t_return - t_call) * 1000)
    row.facts["runs"] += 1
    kind = "none" if error is None else type(error).__name__
    if error is not None and "TimeoutError" in str(error):
        kind += " (TimeoutError)"
    row.facts["error_kinds"][kind] += 1
    stopped = error is not None and (
        "TimeoutError" in str(error) or type(error).__name__ == "MontyCrashedError"
    )
    row.facts["stopped"] += stopped
    if not stopped:
        row.facts.setdefault("completed_in_ms", []).append(round((t_return - t_call) * 1000, 3))
        return
    row.metrics[HOST].append(host)
    over = (t_return - (t_call + budget / 1000)) * 1000
    row.metrics[PLAIN].append(over)
    row.metrics[ESTIMATE].append(over)
    row.metrics[UPPER].append(over)
    if cpu_before is not None and cpu_after is not None:
        row.metrics[BILLED].append(cpu_after - cpu_before)
        row.metrics[BILLED_OVER].append(cpu_after - cpu_before - budget)


async def _monty_wall(pool: Any, row: Row, program: str, budget: int, idle: Idle) -> None:
    c_start, t_call = host_cpu_ms(), mono()
    stopped = False
    with anyio.move_on_after(budget / 1000) as scope:
        async with pool.checkout() as session:
            await session.feed_run(program)
    stopped = scope.cancelled_caught
    t_return = mono()
    host = host_cpu_ms() - c_start - idle.cost((t_return - t_call) * 1000)
    row.facts["runs"] += 1
    row.facts["error_kinds"]["caller timeout" if stopped else "none"] += 1
    row.facts["stopped"] += stopped
    if stopped:
        row.metrics[HOST].append(host)
        over = (t_return - (t_call + budget / 1000)) * 1000
        row.metrics[PLAIN].append(over)
        row.metrics[ESTIMATE].append(over)
        row.metrics[UPPER].append(over)


async def run(config: Config) -> Section:
    import os

    section = Section(
        "budgets",
        "4. Budget enforcement",
        "Whether each budget stops the program, how late run() returns, the CPU billed, and "
        "the host CPU it costs to police it.",
        metric_names=METRICS,
        fact_columns=["stopped"],
    )
    budgets = [50, 100] if config.quick else [50, 100, 500, 1000]
    reps = config.n(2, 5)
    monty_reps = config.n(1, 3)
    nproc = len(os.sched_getaffinity(0))
    pm = monty()
    idle = await _baseline([*budgets, 1500])
    section.notes.append(
        "Idle baseline (host CPU of an `anyio.sleep` of the same length, a line fitted to "
        f"waits of {', '.join(str(b) for b in [*budgets, 1500])} ms): {idle.text()}"
    )

    async with SubprocessRuntime() as rt:
        await rt.run(RunRequest(program="1"))
        trivial, monty_trivial = await _overshoot.measure(section, config, rt, pm)
        targets = list(section.rows)
        section.rows = []
        rows = _matrix_rows(section, budgets)
        for _ in range(reps):
            for budget in budgets:
                for name, (program, rate, _m) in COMPUTE.items():
                    await _dsh_compute(
                        rt,
                        rows[name, budget, DSH],
                        program=program,
                        rate=rate,
                        budget=budget,
                        idle=idle,
                        nproc=nproc,
                    )
                for name, (program, _m2) in WALL.items():
                    await _dsh_wall(rt, rows[name, budget, DSH], program, budget, idle)

    if pm is not None:
        with pm.Monty() as pool:
            for _ in range(monty_reps):
                for budget in budgets:
                    for name, (_p, _r, m_program) in COMPUTE.items():
                        if m_program is not None:
                            _monty_compute(
                                pool,
                                pm,
                                rows[name, budget, MONTY],
                                program=m_program,
                                budget=budget,
                                idle=idle,
                            )
        async with pm.AsyncMonty() as apool:
            for _ in range(monty_reps):
                for budget in budgets:
                    for name, (_p2, m_program) in WALL.items():
                        if m_program is not None:
                            await _monty_wall(
                                apool, rows[name, budget, MONTY], m_program, budget, idle
                            )
    section.rows = targets + _final(section.rows, pm, trivial, monty_trivial or 0.0)
    _settle_beside_target(section.rows)
    section.notes += [
        "over: compute budgets, run() returned - called - budget - the trivial-run p50 of the "
        f"target rows (dsh-code {trivial:.3g} ms, monty {monty_trivial or 0:.3g} ms); wall "
        "budgets, run() returned - called - budget.",
        "settle over, estimate: run() returned minus the moment the tree's CPU crossed the "
        "budget, at the burn rate achieved (see module docstring); the JSON has the upper "
        "bound too (the same at a full-speed burn). For wall budgets both are run() returned "
        "minus (called + budget).",
        "billed CPU: stats.compute_ms (dsh-code); for monty, the worker's CPU clock over the "
        "feed, when the worker survived to be read. Monty's limit is execution wall time, not "
        "CPU: on a contended machine it stops the program before it has used the budget's CPU "
        "(negative billed over).",
        "host CPU: host process CPU time over the run minus the idle baseline; it includes "
        "starting the child and cleaning up, not only polling.",
        "Monty: compute budgets are `ResourceLimits(max_feed_duration_secs=budget)` on a "
        "`Monty()` pool (its clock runs while sandbox code executes); crossing = feed_run "
        "called + budget. A feed stuck in C (the integer power) is only stopped when the pool "
        "kills the worker after `feed_duration_limit_grace` (default 1 s).",
        "A run that was not stopped by its budget is a failure: counted, in no metric.",
    ]
    return section


def _settle_beside_target(rows: list[Row]) -> None:
    """Add the matrix's settle estimate of the 100 ms hot loop to the target row's peer text:
    the plain overshoot also counts a burn slower than one CPU, the estimate does not."""
    hot = next((r for r in rows if r.workload == _overshoot.HOT and r.system == DSH), None)
    matrix = next(
        (
            r
            for r in rows
            if r.system == DSH
            and r.facts.get("workload") == "Python hot loop"
            and r.facts.get("budget_ms") == _overshoot.BUDGET_MS
        ),
        None,
    )
    if hot is None or hot.target is None or matrix is None:
        return
    settle = figure(matrix, "dsh-code settle after the crossing (matrix, estimate)", ESTIMATE)
    hot.target = replace(hot.target, peer=f"{hot.target.peer}; {settle}")


def _matrix_rows(section: Section, budgets: list[int]) -> dict[tuple[str, int, str], Row]:
    rows: dict[tuple[str, int, str], Row] = {}
    for name in COMPUTE:
        for budget in budgets:
            rows[name, budget, DSH] = _row(section, name, budget, "compute", DSH)
            rows[name, budget, MONTY] = _row(section, name, budget, "compute", MONTY)
    for name in WALL:
        for budget in budgets:
            rows[name, budget, DSH] = _row(section, name, budget, "wall", DSH)
            rows[name, budget, MONTY] = _row(section, name, budget, "wall", MONTY)
    return rows


def _final(rows: list[Row], pm: Any, trivial: float, monty_trivial: float) -> list[Row]:
    """The matrix rows as reported: monty's it cannot run marked n/a, notes, ``over``."""
    final: list[Row] = []
    keep = ("budget_ms", "budget_kind", "workload")
    for row in rows:
        if row.system == MONTY:
            workload = row.facts["workload"]
            peer = COMPUTE[workload][2] if workload in COMPUTE else WALL[workload][1]
            if pm is None:
                final.append(Unavailable(row.workload, MONTY, "ms", monty_missing()))
                final[-1].facts = {k: row.facts[k] for k in keep}
                continue
            if peer is None:
                final.append(
                    Unavailable(
                        row.workload,
                        MONTY,
                        "ms",
                        "n/a: monty has no threads, processes, syscalls or signals",
                    )
                )
                final[-1].facts = {k: row.facts[k] for k in keep}
                continue
            if workload.startswith("C: catastrophic") and row.facts.get("completed_in_ms"):
                done = ", ".join(f"{x:g}" for x in row.facts["completed_in_ms"])
                row.note = (
                    f"completed in {done} ms, nothing to stop: monty's regex engine does not "
                    "blow up on this pattern"
                )
            if workload.startswith("wall"):
                row.note = (
                    "caller-imposed: anyio.move_on_after(budget) around checkout + feed_run "
                    "(monty's own duration limits exclude sleeps)"
                )
        pids = row.facts.get("returned_pids")
        if pids:
            row.note = (
                f"the program returned (pid inside the run: {sorted(set(pids))}): SIGSTOP sent "
                "by PID 1 of a PID namespace to itself is ignored, so nothing stopped"
                if set(pids) == {1}
                else f"the program returned after SIGSTOP (pids {sorted(set(pids))})"
            )
        _finish(row, monty_trivial if row.system == MONTY else trivial)
        final.append(row)
    return final
