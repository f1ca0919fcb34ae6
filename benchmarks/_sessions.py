"""Section 6: sessions — what carrying state from one run to the next costs per step.

A session (``rt.session()``) is seeded with an untimed first run; then 10 steps, each timed
end to end (``Session.run``), each followed by the same program text run without a session
(``rt.run``, stateless) and timed too; the per-step overhead is the difference of the pair.
Workloads:

- a dict of 1,000 entries (seeded), to which each step adds an entry, and a function each
  step defines (the state grows to 1,010 entries and 10 functions), on ``SubprocessRuntime()``;
- a 1 MiB pandas DataFrame (65,536 rows, two float64 columns, seeded) that each step reads,
  on ``SubprocessRuntime(preload=("numpy", "pandas"))`` (needs the ``bench`` extra).

Each step and stateless run follows an untimed pause (back to back, 2 ms and 50 ms: an
agent's steps wait for its model; half as many sessions after 50 ms); the program texts are new every run. A step that does not give
its value (or a stateless run that does not) is a failure, its pair in no sample.
"""

from __future__ import annotations

import importlib.util
import itertools
import time
from collections.abc import Callable
from typing import Any

import anyio

from benchmarks._common import DSH, Config, Row, Section, Target, Unavailable, figure
from host.sandbox import SubprocessRuntime
from runtime import RunRequest

STEPS = 10
PAUSES_MS = (0, 2, 50)
DICT = "1,000-entry dict + a function per step"
FRAME = "1 MiB pandas DataFrame (preloaded numpy, pandas)"

DICT_SEED = "d = {f'k{k}': k for k in range(1000)}\n"
DICT_STEP = (
    "# run {uid}\n"
    "d = globals().get('d', {{}})\n"
    "d['s{j}'] = {j}\n"
    "def f{j}(x):\n"
    "    return x + {j}\n"
    "len(d) + f{j}(0)\n"
)
FRAME_SEED = (
    "import numpy, pandas\n"
    "df = pandas.DataFrame({'a': numpy.arange(65536, dtype='float64'), "
    "'b': numpy.ones(65536)})\n"
)
FRAME_STEP = (
    "# run {uid}\n"
    "import numpy, pandas\n"
    "df = globals().get('df')\n"
    "(float(df['a'].iloc[-1]) if df is not None else -1.0) + {j}\n"
)
_uids = itertools.count(1)

#: workload -> (seed, step, expected value of step j in a session, and stateless)
Expect = Callable[[int], Any]
WORKLOADS: dict[str, tuple[str, str, Expect, Expect]] = {
    DICT: (DICT_SEED, DICT_STEP, lambda j: 1000 + j + 1 + j, lambda j: 1 + j),
    FRAME: (FRAME_SEED, FRAME_STEP, lambda j: 65535.0 + j, lambda j: -1.0 + j),
}


def _label(workload: str, pause_ms: int) -> str:
    return f"{workload}, {'back to back' if pause_ms == 0 else f'after a {pause_ms} ms pause'}"


async def _timed(call: Any, request: RunRequest, pause_s: float) -> tuple[float, Any]:
    if pause_s:
        await anyio.sleep(pause_s)
    t = time.perf_counter()
    r = await call(request)
    return (time.perf_counter() - t) * 1000, r


async def _session(
    rt: SubprocessRuntime, rows: dict[str, Row], workload: str, pause_s: float
) -> None:
    seed, step, in_session, stateless = WORKLOADS[workload]
    async with rt.session() as s:
        r = await s.run(RunRequest(program=seed))
        if r.error is not None:
            rows["overhead"].failures += STEPS
            rows["overhead"].facts.setdefault("seed_errors", []).append(r.error.message[:200])
            return
        for j in range(STEPS):
            text = step.format(uid=next(_uids), j=j)
            with_state, r1 = await _timed(s.run, RunRequest(program=text), pause_s)
            without, r0 = await _timed(rt.run, RunRequest(program=text), pause_s)
            ok1 = r1.error is None and r1.value == in_session(j)
            ok0 = r0.error is None and r0.value == stateless(j)
            if not (ok1 and ok0):
                rows["overhead"].failures += 1
                continue
            rows["overhead"].metrics["value"].append(with_state - without)
            rows["step"].metrics["value"].append(with_state)
            rows["stateless"].metrics["value"].append(without)
            if r1.stats is not None:
                rows["step"].facts["state_bytes"] = r1.stats.state_bytes


async def run(config: Config) -> Section:
    section = Section(
        "sessions",
        "6. Sessions",
        "Per-step overhead of a session (restore and save the state) over a stateless run of "
        "the same program, and both end to end (ms).",
    )
    sessions = config.n(2, 20)
    have_pandas = all(importlib.util.find_spec(m) is not None for m in ("numpy", "pandas"))
    rows: dict[tuple[str, int], dict[str, Row]] = {}
    for workload in WORKLOADS:
        for pause in PAUSES_MS:
            label = _label(workload, pause)
            if workload == FRAME and not have_pandas:
                why = "numpy or pandas not installed (pip install 'dsh-code[bench]')"
                section.add(Unavailable(label, DSH, "ms", why))
                continue
            rows[workload, pause] = {
                "overhead": section.add(
                    Row(f"{label}: per-step overhead", DSH, "ms", {"value": []})
                ),
                "step": section.add(Row(f"{label}: session step", DSH, "ms", {"value": []})),
                "stateless": section.add(Row(f"{label}: stateless run", DSH, "ms", {"value": []})),
            }
    preload = ("numpy", "pandas") if have_pandas else ()
    async with SubprocessRuntime() as plain, SubprocessRuntime(preload=preload) as preloaded:
        for i in range(sessions):
            for (workload, pause), by in rows.items():
                if pause >= 50 and i % 2:
                    continue  # half as many sessions after a 50 ms pause: they are slow
                rt = preloaded if workload == FRAME else plain
                await _session(rt, by, workload, pause / 1000)
    for (workload, pause), by in rows.items():
        if pause != 2:
            continue
        by["overhead"].target = Target(
            "p50",
            "<=",
            1 if workload == DICT else 10,
            what=f"session step overhead, {workload}",
            peer="; ".join(
                [figure(by["stateless"], "stateless run"), figure(by["step"], "session step")]
            ),
        )
    section.notes += [
        f"{sessions} sessions of {STEPS} steps per row (after an untimed seed run); each step "
        "is paired with a stateless run of the same text right after it; overhead = step - "
        "stateless, per pair.",
        "state_bytes: the blob's size after the last step (RunStats.state_bytes).",
    ]
    return section
