"""Section 6: the output cap — a print flood stopped at the cap, logs kept up to it.

Programs print 100-byte lines forever (``print``), or write them with ``os.write(1, ...)``,
under ``max_output_bytes`` of 1 MiB. Measured: time from ``run()`` called to returned,
whether the run failed with kind ``output_limit``, and the bytes of logs kept (lines plus
their newlines) as a fraction of the cap. Monty prints into a ``CollectString(max_bytes=cap)``
collector with a 2 s feed limit as a backstop.
"""

from __future__ import annotations

import time
from collections import Counter

from benchmarks._common import DSH, MONTY, Config, Row, Section, Unavailable
from benchmarks._peers import monty, monty_missing
from host.sandbox import SubprocessRuntime
from runtime import Limits, RunRequest

CAP = 1 << 20
BACKSTOP_MS = 2000
FLOODS = {
    "print flood (print of 99 chars, forever)": "while True:\n    print('x' * 99)\n",
    "raw flood (os.write(1, 100 bytes), forever)": (
        "import os\nline = b'x' * 99 + b'\\n'\nwhile True:\n    os.write(1, line)\n"
    ),
}


async def run(config: Config) -> Section:
    section = Section(
        "output",
        "9. Output cap",
        "Milliseconds to stop a print flood at a 1 MiB output cap; logs kept up to the cap.",
        metric_names=["value", "kept / cap"],
        fact_columns=["stopped"],
    )
    reps = config.n(2, 10)
    async with SubprocessRuntime() as rt:
        await rt.run(RunRequest(program="1"))
        for name, program in FLOODS.items():
            row = section.add(
                Row(f"{name}, {CAP // 1024} KiB cap", DSH, "ms", {"value": [], "kept / cap": []})
            )
            kinds: Counter[str] = Counter()
            for _ in range(reps):
                t = time.perf_counter()
                r = await rt.run(
                    RunRequest(
                        program=program,
                        limits=Limits(max_output_bytes=CAP, compute_ms=30_000, max_wall_ms=60_000),
                    )
                )
                elapsed = (time.perf_counter() - t) * 1000
                kinds[r.error.kind if r.error else "none"] += 1
                kept = sum(len(line.encode()) + 1 for line in r.logs)
                if r.error is not None and r.error.kind == "output_limit":
                    row.metrics["value"].append(elapsed)
                    row.metrics["kept / cap"].append(kept / CAP)
                else:
                    row.facts.setdefault("not_stopped_ended_after_ms", []).append(round(elapsed))
            row.facts.update(error_kinds=dict(kinds), stopped=f"{kinds['output_limit']}/{reps}")
            row.failures = reps - kinds["output_limit"]
            row.note = f"stopped as `output_limit`: {kinds['output_limit']}/{reps}"

    pm = monty()
    name = next(iter(FLOODS))
    workload = f"{name}, {CAP // 1024} KiB cap"
    if pm is None:
        section.add(Unavailable(workload, MONTY, "ms", monty_missing()))
    else:
        m_row = section.add(Row(workload, MONTY, "ms", {"value": [], "kept / cap": []}))
        m_kinds: Counter[str] = Counter()
        by_cap = 0
        with pm.Monty() as pool:
            for _ in range(config.n(1, 3)):
                collector = pm.CollectString(max_bytes=CAP)
                t = time.perf_counter()
                try:
                    with pool.checkout(
                        limits=pm.ResourceLimits(max_feed_duration_secs=BACKSTOP_MS / 1000)
                    ) as session:
                        session.feed_run(FLOODS[name], print_callback=collector)
                    m_kinds["none"] += 1
                    text = ""
                except Exception as exc:
                    text = str(exc)
                    m_kinds[
                        "MemoryError (collector full)"
                        if "MemoryError" in text
                        else "TimeoutError"
                        if "TimeoutError" in text
                        else type(exc).__name__
                    ] += 1
                elapsed = (time.perf_counter() - t) * 1000
                stopped = "MemoryError" in text and elapsed < BACKSTOP_MS * 0.9
                by_cap += stopped
                if stopped:
                    m_row.metrics["value"].append(elapsed)
                    m_row.metrics["kept / cap"].append(len(collector.output.encode()) / CAP)
                else:
                    m_row.facts.setdefault("not_stopped_ended_after_ms", []).append(round(elapsed))
        runs = sum(m_kinds.values())
        m_row.facts.update(error_kinds=dict(m_kinds), stopped=f"{by_cap}/{runs}")
        m_row.failures = runs - by_cap
        m_row.note = (
            f"CollectString(max_bytes=cap), {BACKSTOP_MS / 1000:g} s feed limit as a backstop; "
            f"outcomes: {dict(m_kinds)}; stopped counts only runs ended before the backstop; "
            f"the others ended after {m_row.facts.get('not_stopped_ended_after_ms', [])} ms"
        )
    section.notes.append(
        "kept / cap: bytes of the logs returned (each line plus its newline) over the cap; "
        "1.0 means every byte up to the cap was kept. A run not stopped by the cap is a "
        "failure, its time in the facts (`not_stopped_ended_after_ms`), not the samples."
    )
    return section
