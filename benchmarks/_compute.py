"""Section 3: compute-heavy programs against the same text run by in-process CPython.

Workloads: a 1M-element sum of squares, and a string-heavy one (f-strings, upper/replace,
join, split, dict counting over 200k items), each as module-level code (what the child runs,
and what ``python prog.py`` runs). Per repetition, interleaved: in-process CPython executes
the text in a fresh module namespace (timed around ``exec``); ``SubprocessRuntime()`` runs it
(timed end to end, from ``run()`` called to returned, and inside the program around the
body); after the same in-process work again (untimed, so the conditions match) a trivial
run is timed; pydantic-monty runs the body on a reused worker (end to end). The target:
end to end ≤ 1.05 x in-process CPython + the trivial run (p50s of the same run).
"""

from __future__ import annotations

import time
from typing import Any

from benchmarks._common import (
    DSH,
    FLOOR,
    MONTY,
    Config,
    Row,
    Section,
    Target,
    Unavailable,
    figure,
    relative,
    stat,
    trivial_program,
)
from benchmarks._peers import monty, monty_missing
from host.sandbox import SubprocessRuntime
from runtime import RunRequest

SUM = "1M-element sum of squares"
WORKLOADS = {
    SUM: "result = 0\nfor i in range(1_000_000):\n    result += i * i\n",
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


def in_process(body: str) -> tuple[float, Any]:
    """(milliseconds, result) of ``body`` executed as a module in this process."""
    code = compile(body, "<program>", "exec")
    namespace: dict[str, Any] = {"__name__": "__main__"}
    t = time.perf_counter()
    exec(code, namespace)
    return (time.perf_counter() - t) * 1000, namespace["result"]


async def run(config: Config) -> Section:
    section = Section(
        "compute",
        "3. Compute",
        "Milliseconds for compute-heavy programs: end to end and in the program, against "
        "in-process CPython running the same module-level text.",
    )
    reps = config.n(3, 15)
    pm = monty()
    pool = pm.Monty().__enter__() if pm is not None else None
    try:
        async with SubprocessRuntime() as rt:
            await rt.run(RunRequest(program="1"))
            for name, body in WORKLOADS.items():
                await _workload(section, rt, pool, name, body, reps)
    finally:
        if pool is not None:
            pool.__exit__(None, None, None)
    if pool is None:
        for name in WORKLOADS:
            section.add(Unavailable(name, f"{MONTY}, end to end", "ms", monty_missing()))
    section.notes += [
        "In-process CPython: `exec` of the same text in a fresh module namespace (module "
        "globals, as the child and `python prog.py` run it), compile excluded.",
        "speed vs CPython: in-process ms / in-program ms per interleaved pair (> 1: the child "
        "was faster); the trivial run follows the same in-process work as the program did.",
        "Monty is timed end to end on a reused worker (its in-sandbox clock is virtual).",
    ]
    return section


async def _workload(
    section: Section, rt: SubprocessRuntime, pool: Any, name: str, body: str, reps: int
) -> None:
    timed = (
        "import time\n_t = time.perf_counter()\n"
        + body
        + ("return [(time.perf_counter() - _t) * 1000, result]\n")
    )
    cpy = section.add(Row(name, f"{FLOOR} (same text, module)", "ms", {"value": []}))
    e2e = section.add(Row(name, f"{DSH}, end to end", "ms", {"value": []}))
    inner = section.add(Row(name, f"{DSH}, timed in the program", "ms", {"value": []}))
    trivial = section.add(Row(name, f"{DSH}, a trivial run beside it", "ms", {"value": []}))
    ratio = section.add(Row(name, f"{DSH}: speed vs CPython (in-program)", "x", {"value": []}))
    m_row = section.add(Row(name, f"{MONTY}, end to end", "ms", {"value": []})) if pool else None
    expected = in_process(body)[1]
    for i in range(reps):
        local, _ = in_process(body)
        cpy.metrics["value"].append(local)
        t = time.perf_counter()
        r = await rt.run(RunRequest(program=f"# run {i}\n" + timed))
        total = (time.perf_counter() - t) * 1000
        if r.error is None and isinstance(r.value, list) and r.value[1] == expected:
            e2e.metrics["value"].append(total)
            inner.metrics["value"].append(float(r.value[0]))
            ratio.metrics["value"].append(local / float(r.value[0]))
        else:
            e2e.failures += 1
        in_process(body)
        program, value = trivial_program()
        t = time.perf_counter()
        r = await rt.run(RunRequest(program=program))
        if r.error is None and r.value == value:
            trivial.metrics["value"].append((time.perf_counter() - t) * 1000)
        else:
            trivial.failures += 1
        if m_row is not None:
            t = time.perf_counter()
            try:
                with pool.checkout() as session:
                    got = session.feed_run(body + "result")
            except Exception as exc:
                got = exc
            if got == expected:
                m_row.metrics["value"].append((time.perf_counter() - t) * 1000)
            else:
                m_row.failures += 1
    if name == SUM:
        e2e.target = relative(
            Target(
                "p50",
                "<=",
                None,
                what="1M sum of squares, end to end",
                peer="; ".join(
                    [
                        figure(m_row, "monty"),
                        figure(cpy, "in-process CPython"),
                        figure(inner, "in the program"),
                    ]
                ),
            ),
            1.05,
            cpy,
            "in-process CPython",
            plus=stat(trivial),
            plus_label="the trivial run",
        )
