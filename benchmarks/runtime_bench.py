"""Benchmark of the code-runtime layer: start-up, binding round trip, compute, budget overshoot.

Measures, side by side in one run (medians and p95; the machine is shared and noisy):
1. a trivial program end to end through ``SubprocessRuntime`` (template fork), against
   spawning ``python -c pass`` directly and in-process ``exec`` (the floor);
2. one binding call's round trip (program -> host -> program), timed inside the program;
3. a compute-heavy program (1M-element sum of squares) in a child vs in-process CPython;
4. overshoot of 100 ms compute and wall budgets (compute billed past the budget, and
   time from start to settle minus the budget).

Usage: ``.venv/bin/python benchmarks/runtime_bench.py [--runs N] [--json FILE]``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from typing import Any

import anyio

from host.sandbox import SubprocessRuntime
from runtime import Limits, RunRequest

SUM_SQUARES = "total = 0\nfor i in range(1_000_000):\n    total += i * i\nreturn total"
CALLS = (
    "import time\n"
    "samples = []\n"
    "for _ in range(N):\n"
    "    t = time.perf_counter()\n"
    "    await tools.noop()\n"
    "    samples.append((time.perf_counter() - t) * 1e6)\n"
    "return samples"
)


def pct(samples: list[float], q: float) -> float:
    """The q-th percentile (0-100) by nearest rank."""
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))]


def summary(samples: list[float]) -> dict[str, float]:
    """Median, p95 and max of a sample list."""
    return {
        "p50": statistics.median(samples),
        "p95": pct(samples, 95),
        "max": max(samples),
        "n": len(samples),
    }


async def noop(args: Any) -> Any:
    return None


def in_process(source: str) -> float:
    """Seconds to run ``source`` (a function body) in this process."""
    namespace: dict[str, Any] = {}
    exec("def body():\n" + "\n".join("    " + line for line in source.splitlines()), namespace)
    t = time.perf_counter()
    namespace["body"]()
    return time.perf_counter() - t


async def bench(runs: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    async with SubprocessRuntime() as rt:
        await rt.run(RunRequest(program="1"))  # start the template
        trivial = []
        for _ in range(runs):
            t = time.perf_counter()
            await rt.run(RunRequest(program="1 + 1"))
            trivial.append((time.perf_counter() - t) * 1000)
        out["trivial_template_fork_ms"] = summary(trivial)

        spawn = []
        for _ in range(max(runs // 4, 10)):
            t = time.perf_counter()
            subprocess.run([sys.executable, "-c", "pass"], check=True)
            spawn.append((time.perf_counter() - t) * 1000)
        out["trivial_python_spawn_ms"] = summary(spawn)
        floor = []
        code = compile("1 + 1", "<program>", "exec")
        for _ in range(runs):
            t = time.perf_counter()
            exec(code, {})
            floor.append((time.perf_counter() - t) * 1000)
        out["trivial_in_process_exec_ms"] = summary(floor)

        result = await rt.run(
            RunRequest(program=CALLS, inputs={"N": 500}, bindings={"tools.noop": noop})
        )
        assert isinstance(result.value, list), result.error
        out["binding_round_trip_us"] = summary(result.value[50:])

        child, local = [], []
        for _ in range(5):
            t = time.perf_counter()
            r = await rt.run(
                RunRequest(
                    program="import time\nt = time.perf_counter()\n"
                    + SUM_SQUARES.replace("return total", "return time.perf_counter() - t")
                )
            )
            child.append(float(r.value))
            local.append(in_process(SUM_SQUARES))
        out["sum_of_squares_child_s"] = summary(child)
        out["sum_of_squares_in_process_s"] = summary(local)
        out["compute_ratio_child_over_cpython"] = statistics.median(child) / statistics.median(
            local
        )

        compute_over, compute_settle, wall_over = [], [], []
        for _ in range(max(runs // 10, 10)):
            t = time.perf_counter()
            r = await rt.run(
                RunRequest(program="while True:\n    pass", limits=Limits(compute_ms=100))
            )
            elapsed = (time.perf_counter() - t) * 1000
            assert r.error is not None and r.error.budget == "compute", r.error
            assert r.stats is not None
            compute_over.append(r.stats.compute_ms - 100)
            compute_settle.append(elapsed - 100)
            t = time.perf_counter()
            r = await rt.run(
                RunRequest(program="import time\ntime.sleep(10)", limits=Limits(max_wall_ms=100))
            )
            assert r.error is not None and r.error.budget == "wall", r.error
            wall_over.append((time.perf_counter() - t) * 1000 - 100)
        out["compute_budget_100ms_billed_over_ms"] = summary(compute_over)
        out["compute_budget_100ms_settle_minus_budget_ms"] = summary(compute_settle)
        out["wall_budget_100ms_overshoot_ms"] = summary(wall_over)
    return out


def table(results: dict[str, Any]) -> str:
    lines = ["| measure | p50 | p95 | max | n |", "|---|---|---|---|---|"]
    for name, value in results.items():
        if isinstance(value, dict):
            lines.append(
                f"| {name} | {value['p50']:.3f} | {value['p95']:.3f} | {value['max']:.3f} | {value['n']} |"
            )
        else:
            lines.append(f"| {name} | {value:.3f} | | | |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=200, help="trivial runs to time (default 200)")
    parser.add_argument("--json", help="also write the figures to this JSON file")
    args = parser.parse_args()
    results = anyio.run(bench, args.runs)
    print(table(results))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=2)


if __name__ == "__main__":
    main()
