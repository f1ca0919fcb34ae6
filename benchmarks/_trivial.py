"""Timing blocks of trivial runs (``f"{i} + 1"``, a fresh text each) for every system.

A block is ``runs`` runs one after another, each after an untimed pause (0: back to back),
the first ``warmup`` of them not counted (the run after switching systems has had a pause,
whatever the block's). A run that does not give its value is a failure: counted in the
row, its time in no sample. The sections interleave blocks of the systems they compare.
"""

from __future__ import annotations

import subprocess
import sys
import time
from typing import Any

import anyio

from benchmarks._common import Row, trivial_program
from runtime import RunRequest

__all__ = ("SETTLE_S", "dsh_block", "floor_block", "monty_block", "python_block")

#: An untimed pause between two blocks, so each starts from a steady state (a runtime's
#: background work after its last run done, a pool's worker replaced).
SETTLE_S = 0.02


async def dsh_block(rt: Any, row: Row, runs: int, pause_s: float, warmup: int = 1) -> None:
    """Time ``runs`` trivial runs of ``rt`` (``await rt.run(...)``) into ``row``."""
    for i in range(runs + warmup):
        program, expected = trivial_program()
        if pause_s:
            await anyio.sleep(pause_s)
        t = time.perf_counter()
        r = await rt.run(RunRequest(program=program))
        elapsed = (time.perf_counter() - t) * 1000
        if i < warmup:
            continue
        if r.error is None and r.value == expected:
            row.metrics["value"].append(elapsed)
        else:
            row.failures += 1
            row.facts.setdefault("failed_as", {})
            kind = r.error.kind if r.error is not None else f"value {r.value!r}"
            row.facts["failed_as"][kind] = row.facts["failed_as"].get(kind, 0) + 1


def monty_block(pool: Any, row: Row, runs: int, pause_s: float, warmup: int = 1) -> None:
    """Time ``runs`` trivial runs of a sync monty pool (checkout + ``feed_run``) into ``row``.

    The pauses are ``time.sleep`` (the sync pool blocks the caller's thread anyway)."""
    for i in range(runs + warmup):
        program, expected = trivial_program()
        if pause_s:
            time.sleep(pause_s)
        t = time.perf_counter()
        try:
            with pool.checkout() as session:
                value = session.feed_run(program)
        except Exception as exc:
            value = exc
        elapsed = (time.perf_counter() - t) * 1000
        if i < warmup:
            continue
        if value == expected:
            row.metrics["value"].append(elapsed)
        else:
            row.failures += 1


def python_block(row: Row, runs: int, pause_s: float, warmup: int = 1) -> None:
    """Time ``runs`` fresh ``python -I -S -c "<i> + 1"`` processes into ``row`` (this
    interpreter, bare: no site-packages to scan, the cheapest Python spawn)."""
    for i in range(runs + warmup):
        program, _ = trivial_program()
        if pause_s:
            time.sleep(pause_s)
        t = time.perf_counter()
        done = subprocess.run([sys.executable, "-I", "-S", "-c", program], check=False)
        elapsed = (time.perf_counter() - t) * 1000
        if i < warmup:
            continue
        if done.returncode == 0:
            row.metrics["value"].append(elapsed)
        else:
            row.failures += 1


def floor_block(row: Row, runs: int) -> None:
    """Time compiling and executing each trivial program in this process (the floor)."""
    for _ in range(runs):
        program, expected = trivial_program()
        t = time.perf_counter()
        value = eval(compile(program, "<program>", "eval"), {})
        elapsed = (time.perf_counter() - t) * 1000
        if value == expected:
            row.metrics["value"].append(elapsed)
        else:
            row.failures += 1
