"""Section 7: a trivial run with two busy neighbours, against the quiet figure of the same run.

Two CPU-burning processes (``python -c "while True: pass"``, started and stopped by this
section, SIGKILLed and reaped on every path) compete for the CPUs. Per round: a quiet block,
then the burners are started (and given 100 ms to be at full burn), a loaded block, and the
burners stopped. Each block runs ``SubprocessRuntime()`` back to back and after a 2 ms and a
50 ms pause, and pydantic-monty with a fresh and a reused worker the same two ways (trivial
programs, a new text every run; the first run of each block not counted). The target: the
loaded p50 ≤ 3 x the quiet p50 of the same system and pause.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import anyio

from benchmarks._common import (
    DSH,
    MONTY_FRESH,
    MONTY_REUSED,
    Config,
    Row,
    Section,
    Target,
    Unavailable,
    figure,
    relative,
)
from benchmarks._peers import monty, monty_missing
from benchmarks._trivial import SETTLE_S, dsh_block, monty_block
from host.sandbox import SubprocessRuntime
from runtime import RunRequest

__all__ = ("burners", "run")

#: Burns until its parent is gone too, so a killed harness leaves no burner behind.
BURN = (
    "import os, sys\n"
    "parent = int(sys.argv[1])\n"
    "while os.getppid() == parent:\n"
    "    for _ in range(100_000):\n"
    "        pass\n"
)
PAUSES_MS = (0, 2, 50)
SYSTEM = f"{DSH}, SubprocessRuntime()"


@contextlib.contextmanager
def burners(count: int = 2) -> Iterator[list[subprocess.Popen[bytes]]]:
    """``count`` CPU-burning processes, killed and reaped when the block ends."""
    procs: list[subprocess.Popen[bytes]] = []
    try:
        for _ in range(count):
            procs.append(
                subprocess.Popen(
                    [sys.executable, "-I", "-S", "-c", BURN, str(os.getpid())],
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                )
            )
        time.sleep(0.1)  # past their start-up: both at full burn
        yield procs
    finally:
        for proc in procs:
            proc.kill()
        for proc in procs:
            proc.wait()


def _workload(pause_ms: int, loaded: bool) -> str:
    base = (
        "trivial run, back to back" if pause_ms == 0 else f"trivial run after a {pause_ms} ms pause"
    )
    return base + (", 2 busy neighbours" if loaded else ", quiet")


async def run(config: Config) -> Section:
    section = Section(
        "load",
        "7. Under load",
        "Milliseconds for a trivial run with two CPU-burning processes beside it, against the "
        "same run's quiet figure.",
    )
    rounds = config.n(2, 10)
    block = config.n(10, 20)
    pm = monty()
    systems = [SYSTEM, MONTY_FRESH, MONTY_REUSED]
    rows: dict[tuple[str, int, bool], Row] = {}
    for system in systems:
        for pause in PAUSES_MS:
            for loaded in (False, True):
                if system != SYSTEM and pm is None:
                    section.add(
                        Unavailable(_workload(pause, loaded), system, "ms", monty_missing())
                    )
                    continue
                rows[system, pause, loaded] = section.add(
                    Row(_workload(pause, loaded), system, "ms", {"value": []})
                )
    async with contextlib.AsyncExitStack() as stack:
        rt = await stack.enter_async_context(SubprocessRuntime())
        await rt.run(RunRequest(program="1"))
        pools: dict[str, Any] = {}
        if pm is not None:
            pools[MONTY_FRESH] = stack.enter_context(pm.Monty(max_checkouts_per_worker=1))
            pools[MONTY_REUSED] = stack.enter_context(pm.Monty())

        async def blocks(loaded: bool) -> None:
            for system in systems:
                for pause in PAUSES_MS:
                    key = (system, pause, loaded)
                    if key not in rows:
                        continue
                    await anyio.sleep(SETTLE_S)
                    size = block if pause < 50 else block // 4
                    if system == SYSTEM:
                        await dsh_block(rt, rows[key], size, pause / 1000)
                    else:
                        monty_block(pools[system], rows[key], size, pause / 1000)

        for _ in range(rounds):
            await blocks(False)
            with burners():
                await blocks(True)
    for pause in (0, 2):  # the targets; after 50 ms is shown beside them
        busy, quiet = rows[SYSTEM, pause, True], rows[SYSTEM, pause, False]
        peers = [
            figure(
                rows.get((m, pause, True)),
                f"{'monty fresh' if m == MONTY_FRESH else 'monty reused'} loaded",
            )
            for m in (MONTY_FRESH, MONTY_REUSED)
        ]
        busy.target = relative(
            Target(
                "p50",
                "<=",
                None,
                what="trivial run with 2 busy neighbours"
                + (" (back to back)" if pause == 0 else f" (after a {pause} ms pause)"),
                peer="; ".join([figure(quiet, "quiet"), *peers]),
            ),
            3.0,
            quiet,
            "the quiet figure",
        )
    section.notes += [
        f"{rounds} rounds of a quiet block then a loaded block ({block} runs per system and "
        f"pause, {block // 4} after a 50 ms pause; the first not counted); the burners: two `python -I -S -c` loops burning CPU "
        "(until their parent is gone), started before each loaded block and killed after it.",
    ]
    return section
