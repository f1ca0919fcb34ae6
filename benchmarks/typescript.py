"""What a TypeScript run costs: TypeScriptRuntime() beside SubprocessRuntime() and a bare Deno.

Measures, with the default configuration of each runtime and a fresh program text per run:
a trivial run back to back and after a 50 ms pause, against a bare ``deno run`` of an empty
file (the same binary, flags and environment as a child, no containment: what starting
Deno costs here); one awaited binding call (a run of ``CALLS`` sequential calls, less a
trivial run, per call), interleaved with the Python runtime's same run; 10 concurrent
calls of 100 ms gathered; a 1M-step loop end to end against a bare ``deno run`` of the same
code; and how far past a 100 ms compute budget a hot loop's ``run()`` returns (returned -
called - budget - a trivial run's p50). p50 / p95 over n samples, failures counted apart.
Prints a markdown table with each target met or not; ``--json FILE`` keeps every figure.
Usage: ``python benchmarks/typescript.py [--runs N] [--json FILE]``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._common import machine_info, summarize
from host.sandbox import SubprocessRuntime, TypeScriptRuntime
from host.sandbox._deno import child_argv
from runtime import CodeRuntime, Limits, RunRequest

CALLS = 50
_LOOP = "let s = 0;\nfor (let i = 0; i < 1_000_000; i++) s += i * i;\n"


async def _echo(args: Any) -> Any:
    return args


async def _slow(args: Any) -> Any:
    await anyio.sleep(0.1)
    return args


class Samples:
    """Timings in ms, and the runs that failed (never among the timings)."""

    def __init__(self) -> None:
        self.ms: list[float] = []
        self.failed = 0

    def summary(self) -> dict[str, Any]:
        return {**summarize(self.ms), "failed": self.failed}


async def _timed(rt: CodeRuntime, request: RunRequest, into: Samples, *, ok: bool = True) -> float:
    start = time.perf_counter()
    result = await rt.run(request)
    took = (time.perf_counter() - start) * 1000
    if result.ok == ok:
        into.ms.append(took)
    else:
        into.failed += 1
    return took


def _bare_deno(code: str, runs: int) -> Samples:
    """``deno run`` of ``code`` (a file), as a child runs Deno: same flags, empty environment."""
    samples = Samples()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp, "bare.js")
        path.write_text(code)
        argv = [*child_argv(Limits().max_heap_mb)[:-1], str(path)]
        for _ in range(runs):
            start = time.perf_counter()
            done = subprocess.run(argv, env={}, cwd="/", stdin=subprocess.DEVNULL, check=False)
            took = (time.perf_counter() - start) * 1000
            if done.returncode == 0:
                samples.ms.append(took)
            else:
                samples.failed += 1
    return samples


async def measure(runs: int) -> dict[str, dict[str, Any]]:
    rows: dict[str, Samples] = {
        name: Samples()
        for name in (
            "ts_back_to_back",
            "ts_after_pause",
            "ts_calls_run",
            "py_calls_run",
            "ts_trivial_for_calls",
            "py_trivial_for_calls",
            "ts_gathered",
            "ts_loop",
            "ts_overshoot",
        )
    }
    async with TypeScriptRuntime() as ts, SubprocessRuntime() as py:
        bindings = {"tools.echo": _echo}
        for i in range(runs):  # back to back: each run starts as the last one returned
            await _timed(ts, RunRequest(program=f"return {i};"), rows["ts_back_to_back"])
        for i in range(runs):
            await anyio.sleep(0.05)
            await _timed(ts, RunRequest(program=f"return {i} + 1;"), rows["ts_after_pause"])
        ts_calls = "for (let j = 0; j < CALLS; j++) await tools.echo({ j });\nreturn {i};"
        py_calls = "for j in range(CALLS):\n    await tools.echo(j=j)\nreturn {i}"
        for i in range(runs):  # interleaved: load hits both alike
            for rt, calls, trivial, name in (
                (ts, ts_calls, "return {i};", "ts"),
                (py, py_calls, "return {i}", "py"),
            ):
                await anyio.sleep(0.05)
                program = calls.replace("CALLS", str(CALLS)).replace("{i}", str(i))
                await _timed(
                    rt, RunRequest(program=program, bindings=bindings), rows[f"{name}_calls_run"]
                )
                await anyio.sleep(0.05)
                request = RunRequest(program=trivial.replace("{i}", str(i + 7)))
                await _timed(rt, request, rows[f"{name}_trivial_for_calls"])
        gathered = (
            "return await Promise.all([...Array(10).keys()].map((j) => tools.slow({ j, i: {i} })));"
        )
        for i in range(max(runs // 10, 5)):
            request = RunRequest(
                program=gathered.replace("{i}", str(i)), bindings={"tools.slow": _slow}
            )
            await _timed(ts, request, rows["ts_gathered"])
        for i in range(max(runs // 10, 5)):
            await _timed(ts, RunRequest(program=_LOOP + f"return s + {i};"), rows["ts_loop"])
        trivial_p50 = summarize(rows["ts_after_pause"].ms).get("p50", 0.0)
        budget = Limits(compute_ms=100)
        for i in range(max(runs // 5, 10)):
            await anyio.sleep(0.05)
            took = await _timed(
                ts,
                RunRequest(program=f"let n = {i};\nwhile (true) n++;", limits=budget),
                Samples(),
                ok=False,
            )
            rows["ts_overshoot"].ms.append(took - 100 - trivial_p50)
    bare_empty = _bare_deno("", runs)
    bare_loop = _bare_deno(_LOOP, max(runs // 10, 5))
    out = {name: samples.summary() for name, samples in rows.items()}
    out["bare_deno_empty"] = bare_empty.summary()
    out["bare_deno_loop"] = bare_loop.summary()
    for lang in ("ts", "py"):
        made, alone = out[f"{lang}_calls_run"], out[f"{lang}_trivial_for_calls"]
        # a difference of two runs' percentiles: the p50's is the figure; a p95's is no p95
        out[f"{lang}_per_call_us"] = {
            "p50": (made["p50"] - alone["p50"]) * 1000 / CALLS,
            "p95": None,
            "n": made["n"],
            "failed": made["failed"],
        }
    return out


def _row(
    what: str, target: str, fig: dict[str, Any], unit: str, met: bool | None, peer: str
) -> str:
    p50, p95 = fig.get("p50"), fig.get("p95")
    spread = "(p50 only)" if p95 is None else f"/ {p95:.3g}"
    shown = (
        "n/a"
        if p50 is None
        else f"{p50:.3g} {spread} {unit} (n {fig['n']}, failed {fig['failed']})"
    )
    verdict = "n/a" if met is None else "yes" if met else "no"
    return f"| {what} | {target} | {shown} | {verdict} | {peer} |"


def table(out: dict[str, dict[str, Any]]) -> str:
    bare, loop = out["bare_deno_empty"], out["bare_deno_loop"]
    b2b, pause = out["ts_back_to_back"], out["ts_after_pause"]
    ts_call, py_call = out["ts_per_call_us"], out["py_per_call_us"]
    lines = [
        "| what | target | measured (p50 / p95) | met | beside it, same run |",
        "|---|---|---|---|---|",
        _row(
            "trivial TypeScript run, back to back",
            f"p50 <= 1.2x a bare `deno run` of an empty file ({1.2 * bare['p50']:.3g} ms)",
            b2b,
            "ms",
            b2b["p50"] <= 1.2 * bare["p50"],
            f"bare `deno run` {bare['p50']:.3g} / {bare['p95']:.3g} ms",
        ),
        _row(
            "trivial TypeScript run after a 50 ms pause",
            "p50 <= 3 ms",
            pause,
            "ms",
            pause["p50"] <= 3,
            "",
        ),
        _row(
            "one awaited binding call (TypeScript)",
            f"p50 <= 1.2x the Python runtime's ({1.2 * py_call['p50']:.3g} us)",
            ts_call,
            "us",
            ts_call["p50"] <= 1.2 * py_call["p50"],
            f"Python runtime {py_call['p50']:.3g} us (p50 only)",
        ),
        _row(
            "10 x 100 ms calls gathered (Promise.all)",
            "p50 <= 130 ms",
            out["ts_gathered"],
            "ms",
            out["ts_gathered"]["p50"] <= 130,
            "",
        ),
        _row(
            "1M-step loop, end to end",
            f"(no target) vs a bare `deno run` of the same code ({loop['p50']:.3g} ms)",
            out["ts_loop"],
            "ms",
            None,
            f"bare `deno run` {loop['p50']:.3g} / {loop['p95']:.3g} ms",
        ),
        _row(
            "compute budget 100 ms on `while (true)`: wall overshoot",
            "p50 <= 2 ms",
            out["ts_overshoot"],
            "ms",
            out["ts_overshoot"]["p50"] <= 2,
            "returned - called - budget - the trivial run's p50",
        ),
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    info = machine_info()
    out = anyio.run(measure, args.runs)
    info["load_avg_at_end"] = os.getloadavg()
    print(
        f"{info['nproc']} cores ({info['cpu_model']}), load {info['load_avg_at_start']} at "
        f"start, {tuple(round(x, 2) for x in info['load_avg_at_end'])} at end; commit "
        f"{info['git_commit']}\n"
    )
    print(table(out))
    if args.json:
        args.json.write_text(json.dumps({"machine": info, "figures": out}, indent=1))


if __name__ == "__main__":
    main()
