"""Section 1: a trivial run end to end (``f"{i} + 1"``), from ``run()`` called to its result.

Systems: ``SubprocessRuntime()`` (the default configuration: what a user gets first),
``SubprocessRuntime(isolation="process")``, pydantic-monty with a fresh worker per run
(``Monty(max_checkouts_per_worker=1)``) and with a reused worker (``Monty()``), a fresh
``python -I -S -c "<i> + 1"`` per run (a bare interpreter: the cheapest spawn), and in-process
``compile`` + ``eval`` (the floor). Each is
measured back to back, after a 2 ms pause and after a 50 ms pause (untimed, before each
run: an agent pauses for its model, a batch does not). The program text is new every run,
so no compile cache answers it. Systems are interleaved: each round runs a block of every
(system, pause) pair, the order rotating from round to round; the first run of each block
is not counted. Failed runs are counted in their own column.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

import anyio

from benchmarks._common import (
    DSH,
    FLOOR,
    MONTY_FRESH,
    MONTY_REUSED,
    Config,
    Row,
    Section,
    Target,
    Unavailable,
    figure,
    relative,
    stat,
)
from benchmarks._peers import monty, monty_missing
from benchmarks._trivial import SETTLE_S, dsh_block, floor_block, monty_block, python_block
from host.sandbox import SubprocessRuntime
from runtime import RunRequest

PAUSES_MS = (0, 2, 50)
PYTHON = "fresh `python -I -S` per run"
DEFAULT_SYSTEM = f"{DSH}, SubprocessRuntime()"
PROCESS_SYSTEM = f'{DSH}, SubprocessRuntime(isolation="process")'


def workload(pause_ms: int) -> str:
    """The workload name of a trivial run after ``pause_ms`` (0: back to back)."""
    return (
        "trivial run, back to back" if pause_ms == 0 else f"trivial run after a {pause_ms} ms pause"
    )


def _block_size(system: str, pause_ms: int) -> int:
    if system == PYTHON:
        return 2
    if pause_ms >= 50:
        return 4
    return 10


async def isolation_of(rt: SubprocessRuntime) -> str:
    """The isolation level the runtime's runs get on this machine."""
    r = await rt.run(RunRequest(program="1"))
    return r.stats.isolation if r.stats is not None else "unknown"


async def run(config: Config) -> Section:
    section = Section(
        "startup",
        "1. Trivial run end to end",
        "Milliseconds from calling run() to having the result of a trivial program (a new "
        "text every run), one run at a time: back to back and after a pause.",
    )
    rounds = config.n(4, 50)
    pm = monty()
    rows: dict[tuple[str, int], Row] = {}
    blocks: dict[str, Callable[[Row, int, float], Any]] = {}

    systems = [DEFAULT_SYSTEM, PROCESS_SYSTEM, MONTY_FRESH, MONTY_REUSED, PYTHON]
    for system in systems:
        for pause in PAUSES_MS:
            if system in (MONTY_FRESH, MONTY_REUSED) and pm is None:
                section.add(Unavailable(workload(pause), system, "ms", monty_missing()))
                continue
            rows[system, pause] = section.add(Row(workload(pause), system, "ms", {"value": []}))
    async with contextlib.AsyncExitStack() as stack:
        default = await stack.enter_async_context(SubprocessRuntime())
        process = await stack.enter_async_context(SubprocessRuntime(isolation="process"))
        level = await isolation_of(default)

        async def on_default(row: Row, n: int, pause_s: float) -> None:
            await dsh_block(default, row, n, pause_s)

        async def on_process(row: Row, n: int, pause_s: float) -> None:
            await dsh_block(process, row, n, pause_s)

        blocks[DEFAULT_SYSTEM] = on_default
        blocks[PROCESS_SYSTEM] = on_process
        blocks[PYTHON] = python_block
        if pm is not None:
            fresh = stack.enter_context(pm.Monty(max_checkouts_per_worker=1))
            reused = stack.enter_context(pm.Monty())
            blocks[MONTY_FRESH] = lambda row, n, p: monty_block(fresh, row, n, p)
            blocks[MONTY_REUSED] = lambda row, n, p: monty_block(reused, row, n, p)
        for r in range(rounds):
            order = systems[r % len(systems) :] + systems[: r % len(systems)]
            for system in order:
                if system not in blocks:
                    continue
                for pause in PAUSES_MS:
                    await anyio.sleep(SETTLE_S)
                    done = blocks[system](
                        rows[system, pause], _block_size(system, pause), pause / 1000
                    )
                    if done is not None:
                        await done

    floor = section.add(Row(workload(0), f"{FLOOR}: compile + eval (floor)", "ms", {"value": []}))
    floor_block(floor, config.n(40, 500))
    _targets(rows, level)
    section.notes += [
        f"SubprocessRuntime() gave isolation {level!r} on this machine.",
        "Interleaved: each round runs a block of every (system, pause) pair, rotating the "
        f"order; blocks of 10 runs (4 after a 50 ms pause, 2 for `python`), the first of "
        f"each not counted; {SETTLE_S * 1000:g} ms untimed between blocks.",
        "Monty: `with pool.checkout() as s: s.feed_run(program)` on a `Monty()` pool made "
        "once; the fresh-worker pool has `max_checkouts_per_worker=1`, so it replaces the "
        "worker after every run (in the background).",
    ]
    return section


def _targets(rows: dict[tuple[str, int], Row], level: str) -> None:
    fresh0, reused0 = rows.get((MONTY_FRESH, 0)), rows.get((MONTY_REUSED, 0))
    peer0 = "; ".join(
        [
            figure(fresh0, "monty fresh worker"),
            figure(reused0, "monty reused worker"),
            figure(rows.get((PYTHON, 0)), "fresh `python -I -S`"),
        ]
    )
    rows[DEFAULT_SYSTEM, 0].target = relative(
        Target(
            "p50",
            "<=",
            None,
            what=f"trivial run, back to back (default: {level})",
            peer=peer0,
        ),
        1.0,
        fresh0,
        "pydantic-monty fresh worker, back to back",
        stretch_factor=0.5,
    )
    reused2 = rows.get((MONTY_REUSED, 2))
    stretch = stat(reused2)
    rows[DEFAULT_SYSTEM, 2].target = Target(
        "p50",
        "<=",
        0.5,
        what=f"trivial run after a 2 ms pause (default: {level})",
        stretch=stretch,
        basis="stretch: ≤ a reused monty worker after a 2 ms pause" if stretch else "",
        peer="; ".join(
            [figure(reused2, "monty reused worker"), figure(rows.get((MONTY_FRESH, 2)), "fresh")]
        ),
    )
    rows[PROCESS_SYSTEM, 2].target = Target(
        "p50",
        "<=",
        0.3,
        what='`isolation="process"` after a 2 ms pause',
        peer=figure(reused2, "monty reused worker"),
    )
