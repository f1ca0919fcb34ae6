"""Section 3: compute-heavy programs against the same code run by in-process CPython.

Workloads: a 1M-element sum of squares, and a string-heavy one (f-strings, upper/replace,
join, split, dict counting over 200k items). The child times the body itself
(``perf_counter`` around it, start-up excluded) and also end to end; in-process CPython runs
the same body as a function (fast locals, as in the child's async function body). Runs are
interleaved so the machine's noise hits both alike; the speed ratio is CPython time / child
time per interleaved pair (1.0 = as fast, the target is ≥ 0.95).
"""

from __future__ import annotations

import time
from typing import Any

from benchmarks._common import DSH, FLOOR, MONTY, Config, Row, Section, Target, Unavailable
from benchmarks._peers import monty, monty_missing
from host.sandbox import SubprocessRuntime
from runtime import RunRequest

WORKLOADS = {
    "1M-element sum of squares": ("result = 0\nfor i in range(1_000_000):\n    result += i * i\n"),
    "string-heavy (200k items)": (
        "words = []\n"
        "for i in range(200_000):\n"
        "    s = f'item-{i}-{i * 7 % 13}'\n"
        "    words.append(s.upper().replace('-', '_'))\n"
        "text = ' '.join(words)\n"
        "counts = {}\n"
        "for w in text.split(' '):\n"
        "    k = w[-2:]\n"
        "    counts[k] = counts.get(k, 0) + 1\n"
        "result = len(text) + len(counts)\n"
    ),
}


def _in_process(body: str) -> tuple[float, Any]:
    """(seconds, result) of ``body`` run as a function in this process."""
    namespace: dict[str, Any] = {}
    source = "def body():\n" + "".join(f"    {line}\n" for line in body.splitlines())
    exec(source + "    return result\n", namespace)
    t = time.perf_counter()
    value = namespace["body"]()
    return time.perf_counter() - t, value


async def run(config: Config) -> Section:
    section = Section(
        "compute",
        "3. Compute",
        "Seconds for compute-heavy bodies, and speed relative to in-process CPython.",
        metric_names=["value"],
    )
    reps = config.n(3, 15)
    pm = monty()
    async with SubprocessRuntime() as rt:
        await rt.run(RunRequest(program="1"))
        pool = pm.Monty() if pm is not None else None
        if pool is not None:
            pool.__enter__()
        try:
            for name, body in WORKLOADS.items():
                timed_program = (
                    "import time\nt = time.perf_counter()\n"
                    + body
                    + "return [time.perf_counter() - t, result]"
                )
                cpy = section.add(Row(name, f"{FLOOR} (same body, function)", "s", {"value": []}))
                inner = section.add(Row(name, f"{DSH}, timed in program", "s", {"value": []}))
                e2e = section.add(Row(name, f"{DSH}, end to end", "s", {"value": []}))
                ratio = section.add(
                    Row(
                        name,
                        f"{DSH}: speed vs CPython (CPython time / child time)",
                        "x",
                        {"value": []},
                        target=Target("p50", ">=", 0.95),
                    )
                )
                m_row = (
                    section.add(Row(name, f"{MONTY}, end to end", "s", {"value": []}))
                    if pool is not None
                    else section.add(Unavailable(name, MONTY, "s", monty_missing()))
                )
                m_ratio = (
                    section.add(Row(name, f"{MONTY}: speed vs CPython", "x", {"value": []}))
                    if pool is not None
                    else None
                )
                expected = _in_process(body)[1]
                for _ in range(reps):
                    t = time.perf_counter()
                    r = await rt.run(RunRequest(program=timed_program))
                    total = time.perf_counter() - t
                    local, _value = _in_process(body)
                    cpy.metrics["value"].append(local)
                    if not isinstance(r.value, list) or r.value[1] != expected:
                        inner.facts["failures"] = inner.facts.get("failures", 0) + 1
                        continue
                    inner.metrics["value"].append(float(r.value[0]))
                    e2e.metrics["value"].append(total)
                    ratio.metrics["value"].append(local / float(r.value[0]))
                    if pool is not None and m_ratio is not None:
                        t = time.perf_counter()
                        with pool.checkout() as session:
                            got = session.feed_run(body + "result")
                        m_time = time.perf_counter() - t
                        if got == expected:
                            m_row.metrics["value"].append(m_time)
                            m_ratio.metrics["value"].append(local / m_time)
        finally:
            if pool is not None:
                pool.__exit__(None, None, None)
    section.notes += [
        "Speed ratio per interleaved pair: in-process CPython seconds / child seconds (timed "
        "inside the program, start-up excluded); > 1 means the child was faster.",
        "Monty is timed end to end (its in-sandbox clock is virtual); its start-up (~0.3 ms) "
        "is negligible next to these bodies.",
    ]
    return section
