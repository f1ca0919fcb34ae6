"""Where a trivial run's time goes: the wall time between the steps of one run, p50 and p90.

Runs ``1 + 1`` one at a time and marks, from the host, the first time each step of the run
is reached (by wrapping ``host.sandbox``'s private steps, so it measures the code as it is):

- ``before spawn``: run() called -> the run starts (checks, the slot, the limiter);
- ``child ready``: -> the child said Ready (0 for a spare that was waiting already);
- ``program done``: -> the report was read (Start sent, the program, its report);
- ``unwound``: -> the run's watchers have unwound (clean-up starts);
- ``exited``: -> the child has exited (pidfd);
- ``all gone``: -> every other process of the run has exited too;
- ``cleaned``: -> logs drained, fds closed, directory removed;
- ``returned``: -> run() returned (cgroup released, the next spare asked for).

Usage: ``python benchmarks/timeline.py [--isolation auto|process|namespaces] [--prefork N]
[--gap-ms MS] [--runs N] [--no-cgroups]``. The gap is an untimed pause before each run: at a
few ms a spare may still be setting up (``child ready`` shows it); long gaps let the CPUs
go idle, and waking them costs too.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import anyio

from benchmarks._common import pct, summarize
from host.sandbox import SubprocessRuntime
from host.sandbox._run import Run
from runtime import RunRequest

STEPS = (
    ("before spawn", "spawn"),
    ("child ready", "ready"),
    ("program done", "settled"),
    ("unwound", "cleanup"),
    ("exited", "exited"),
    ("all gone", "gone"),
    ("cleaned", "cleaned"),
)

_marks: dict[str, float] = {}


def _mark(name: str) -> None:
    _marks.setdefault(name, time.perf_counter())


def _around(name: str, before: str | None, after: str | None) -> None:
    """Wrap the coroutine method ``Run.<name>`` to mark when it starts and ends."""
    method: Callable[..., Awaitable[Any]] = getattr(Run, name)

    async def wrapped(self: Run, *args: Any, **kwargs: Any) -> Any:
        if before:
            _mark(before)
        try:
            return await method(self, *args, **kwargs)
        finally:
            if after:
                _mark(after)

    setattr(Run, name, wrapped)


def _instrument() -> None:
    _around("_spawn", "spawn", None)
    _around("_wait_ready", None, "ready")
    _around("_conclude", "cleanup", "cleaned")
    _around("_wait_cgroup_empty", None, "gone")
    settle = Run._settle

    def settled(self: Run, outcome: Any) -> None:
        if self.guard.outcome is None:
            _mark("settled")
        settle(self, outcome)

    Run._settle = settled  # type: ignore[method-assign]
    wait_exited = Run._wait_exited

    async def exited(self: Run) -> None:
        await wait_exited(self)
        if "cleanup" in _marks:  # the clean-up's own wait, not the watcher's
            _mark("exited")

    Run._wait_exited = exited  # type: ignore[method-assign]


async def _measure(args: argparse.Namespace) -> dict[str, list[float]]:
    steps: dict[str, list[float]] = {label: [] for label, _ in STEPS}
    steps["returned"], steps["TOTAL"] = [], []
    runtime = SubprocessRuntime(
        isolation=args.isolation, prefork=args.prefork, use_cgroups=not args.no_cgroups
    )
    async with runtime as rt:
        for i in range(args.runs + 10):
            await anyio.sleep(args.gap_ms / 1000)
            _marks.clear()
            called = time.perf_counter()
            result = await rt.run(RunRequest(program="1 + 1"))
            returned = time.perf_counter()
            if result.value != 2:
                raise SystemExit(f"the run failed: {result.error}")
            if i < 10:
                continue  # warm-up
            last = called
            for label, mark in STEPS:
                at = _marks.get(mark, last)  # a step not reached (e.g. no cgroup) takes 0
                steps[label].append((at - last) * 1000)
                last = max(at, last)
            steps["returned"].append((returned - last) * 1000)
            steps["TOTAL"].append((returned - called) * 1000)
        print(
            f"isolation {rt.isolation}, cgroups {rt.cgroups or 'none'}, prefork {args.prefork}, "
            f"gap {args.gap_ms:g} ms, {args.runs} runs (ms):\n"
        )
    return steps


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--isolation", default="auto", choices=("auto", "process", "namespaces"))
    parser.add_argument("--prefork", type=int, default=1)
    parser.add_argument("--gap-ms", type=float, default=20.0)
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--no-cgroups", action="store_true")
    args = parser.parse_args()
    if args.runs < 1 or args.prefork < 0 or args.gap_ms < 0:
        parser.error("--runs must be at least 1, --prefork and --gap-ms at least 0")
    _instrument()
    steps = anyio.run(_measure, args)
    print("| step | p50 | p90 |\n|---|---|---|")
    for label, samples in steps.items():
        print(f"| {label} | {summarize(samples)['p50']:.3f} | {pct(samples, 90):.3f} |")


if __name__ == "__main__":
    main()
