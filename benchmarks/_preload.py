"""Section 5: ``import numpy, pandas`` and a small DataFrame, end to end, preloaded or not.

The program imports numpy and pandas, builds a 3-row DataFrame and returns a column's sum
(a new text every run). Systems, interleaved per round: ``SubprocessRuntime(preload=("numpy",
"pandas"))`` (the template imports them once; each run's child inherits them), back to back
and after a 2 ms and a 50 ms pause; ``SubprocessRuntime()`` (each run imports them); a fresh
``python -I -c`` per run with the same code (site-packages on the path, as a user's script
has it). pydantic-monty cannot import numpy or pandas. Needs numpy and pandas (the ``bench``
extra); without them the rows say why.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import time

import anyio

from benchmarks._common import DSH, MONTY, Config, Row, Section, Target, Unavailable, figure
from benchmarks._trivial import SETTLE_S
from host.sandbox import SubprocessRuntime
from runtime import RunRequest

BODY = (
    "import numpy, pandas\n"
    "df = pandas.DataFrame({'a': [1, 2, 3], 'b': numpy.array([4.0, 5.0, 6.0])})\n"
    "x = int(df['a'].sum())\n"
)
WORKLOAD = "import numpy, pandas + a small DataFrame, end to end"
PRELOADED = f'{DSH}, SubprocessRuntime(preload=("numpy", "pandas"))'
PLAIN = f"{DSH}, SubprocessRuntime()"
PYTHON = "fresh `python -I` per run"
PAUSES_MS = (0, 2, 50)
_runs = 0


def _program() -> str:
    global _runs
    _runs += 1
    return f"# run {_runs}\n{BODY}x\n"


def _workload(pause_ms: int) -> str:
    return WORKLOAD + (", back to back" if pause_ms == 0 else f", after a {pause_ms} ms pause")


async def _dsh(rt: SubprocessRuntime, row: Row, runs: int, pause_s: float) -> None:
    for i in range(runs + 1):
        if pause_s:
            await anyio.sleep(pause_s)
        t = time.perf_counter()
        r = await rt.run(RunRequest(program=_program()))
        elapsed = (time.perf_counter() - t) * 1000
        if i == 0:
            continue  # the run after switching systems has had a pause, whatever the block's
        if r.error is None and r.value == 6:
            row.metrics["value"].append(elapsed)
        else:
            row.failures += 1


def _python(row: Row) -> None:
    t = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-I", "-c", _program() + "assert x == 6\n"],
        capture_output=True,
        check=False,
    )
    if done.returncode == 0:
        row.metrics["value"].append((time.perf_counter() - t) * 1000)
    else:
        row.failures += 1


async def run(config: Config) -> Section:
    section = Section(
        "preload",
        "5. Preloaded libraries",
        "Milliseconds from run() called to the result of a program that imports numpy and "
        "pandas and builds a small DataFrame.",
    )
    missing = [m for m in ("numpy", "pandas") if importlib.util.find_spec(m) is None]
    if missing:
        why = f"{' and '.join(missing)} not installed (pip install 'dsh-code[bench]')"
        for system in (PRELOADED, PLAIN, PYTHON):
            section.add(Unavailable(WORKLOAD, system, "ms", why))
        return section
    rounds = config.n(2, 10)
    rows = {p: section.add(Row(_workload(p), PRELOADED, "ms", {"value": []})) for p in PAUSES_MS}
    plain = section.add(Row(_workload(2), PLAIN, "ms", {"value": []}))
    python = section.add(Row(_workload(2), PYTHON, "ms", {"value": []}))
    section.add(Unavailable(WORKLOAD, MONTY, "ms", "n/a: monty cannot import numpy or pandas"))
    async with (
        SubprocessRuntime(preload=("numpy", "pandas")) as preloaded,
        SubprocessRuntime() as default,
    ):
        await preloaded.run(RunRequest(program="1"))
        await default.run(RunRequest(program="1"))
        for _ in range(rounds):
            for pause in PAUSES_MS:
                await anyio.sleep(SETTLE_S)
                await _dsh(preloaded, rows[pause], 4 if pause >= 50 else 10, pause / 1000)
            await anyio.sleep(SETTLE_S)
            await _dsh(default, plain, 1, 0.002)
            time.sleep(0.002)
            _python(python)
    rows[0].target = Target(
        "p50",
        "<=",
        5,
        what="`import numpy, pandas` + a small DataFrame, preloaded (back to back)",
        peer="; ".join(
            [
                figure(plain, "without preload"),
                figure(python, "fresh `python`"),
                figure(rows[2], "preloaded after a 2 ms pause"),
                "monty: n/a",
            ]
        ),
    )
    section.notes += [
        "Interleaved per round: blocks of 10 preloaded runs (4 after a 50 ms pause; the first "
        "of each not counted), one run without preload, one fresh `python -I -c`.",
        "Without preload and with `python`, each run imports numpy and pandas itself.",
    ]
    return section
