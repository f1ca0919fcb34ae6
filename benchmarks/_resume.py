"""Section 12: resume — what replaying a journal costs per recorded call.

For N in 10, 100 and 1,000: a program makes N awaited binding calls in a row
(``await tools.noop(i=i)``), recorded as they settle (the live run, timed too); then its
journal is resumed (``rt.run(request, resume=journal)``) and timed end to end: the child
answers every recorded call itself, from the journal, in the order they settled (no call
crosses to the host, no binding runs). Each resume is paired with the resume of a journal
of no calls (the same program with N = 0: a trivial run that is also a resume), the two in
turn (which one goes first alternates), each after a 50 ms pause (so each finds a child
forked ahead of time, as a resume after a person's answer would); per replayed call =
(resume(N) - resume(0)) / N, per pair. Every program text is new and is run live (untimed)
before its resume, so both resumes find it compiled. A resume that does not give the value,
or that runs a binding, is a failure.
"""

from __future__ import annotations

import itertools
import time

import anyio

from benchmarks._common import DSH, Config, Row, Section, Target
from host.sandbox import SubprocessRuntime
from runtime import Journal, RunRequest, RunResult

SIZES = (10, 100, 1000)
PAUSE_S = 0.05
PROGRAM = "# run {uid}\nfor i in range({n}):\n    await tools.noop(i=i)\nreturn {n}\n"
_uids = itertools.count(1)


class _Noop:
    """The binding of every call; counts what really ran."""

    def __init__(self) -> None:
        self.ran = 0

    async def __call__(self, args: object) -> None:
        self.ran += 1


async def _live(rt: SubprocessRuntime, noop: _Noop, n: int) -> tuple[float, RunResult]:
    request = RunRequest(
        program=PROGRAM.format(uid=next(_uids), n=n), bindings={"tools.noop": noop}
    )
    t = time.perf_counter()
    result = await rt.run(request)
    return (time.perf_counter() - t) * 1000, result


async def _resumed(
    rt: SubprocessRuntime, noop: _Noop, live: RunResult
) -> tuple[float, RunResult | None]:
    journal = live.journal
    if journal is None or live.error is not None:
        return 0.0, None
    journal = Journal.loads(journal.dumps())  # as a file would bring it back
    request = RunRequest(program=journal.program, bindings={"tools.noop": noop})
    before = noop.ran
    await anyio.sleep(PAUSE_S)
    t = time.perf_counter()
    result = await rt.run(request, resume=journal)
    took = (time.perf_counter() - t) * 1000
    return took, result if noop.ran == before else None


async def run(config: Config) -> Section:
    section = Section(
        "resume",
        "12. Resume by replay",
        "A run resumed from its journal: end to end for N recorded calls (ms), the live run "
        "that recorded them (ms), and the cost per replayed call over a trivial resume (µs).",
    )
    reps = config.n(10, 60)
    base = section.add(Row("resume of a journal of 0 calls (trivial)", DSH, "ms", {"value": []}))
    rows: dict[int, dict[str, Row]] = {}
    for n in SIZES:
        rows[n] = {
            "per_call": section.add(
                Row(f"{n} recorded calls: per replayed call", DSH, "µs", {"value": []})
            ),
            "resume": section.add(Row(f"{n} recorded calls: resume", DSH, "ms", {"value": []})),
            "live": section.add(Row(f"{n} recorded calls: live run", DSH, "ms", {"value": []})),
        }
    noop = _Noop()
    async with SubprocessRuntime() as rt:
        for rep in range(reps):
            for n in SIZES:
                by = rows[n]
                _, trivial_live = await _live(rt, noop, 0)
                live_ms, live = await _live(rt, noop, n)
                if live.value != n:
                    by["live"].failures += 1
                    continue
                by["live"].metrics["value"].append(live_ms)
                if rep % 2:
                    resume_ms, resumed = await _resumed(rt, noop, live)
                    trivial_ms, trivial = await _resumed(rt, noop, trivial_live)
                else:
                    trivial_ms, trivial = await _resumed(rt, noop, trivial_live)
                    resume_ms, resumed = await _resumed(rt, noop, live)
                if trivial is None or trivial.value != 0:
                    base.failures += 1
                    continue
                base.metrics["value"].append(trivial_ms)
                if resumed is None or resumed.value != n:
                    by["resume"].failures += 1
                    continue
                by["resume"].metrics["value"].append(resume_ms)
                by["per_call"].metrics["value"].append((resume_ms - trivial_ms) * 1000 / n)
    for n in SIZES:
        rows[n]["per_call"].target = Target(
            "p50", "<=", 20, what=f"replay on resume, per replayed call ({n} calls)"
        )
    section.notes += [
        f"{reps} repetitions; each one runs every size in turn (live, then the two resumes, "
        "each after a 50 ms pause, in alternating order).",
        "per replayed call: (resume of N calls - resume of 0 calls) / N, per pair.",
    ]
    return section
