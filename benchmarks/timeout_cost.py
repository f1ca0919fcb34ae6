"""Cost of a tool's ``timeout_ms`` per call through the host's pipeline: median and p95.

The same trivial tool (sync: run in a worker thread; async) registered with and without a
``timeout_ms`` is invoked through ``ToolRegistry.invoke`` in rounds, the two interleaved so a
noisy machine moves both alike. Usage: ``python benchmarks/timeout_cost.py [--rounds N]``.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._common import machine_info, machine_label, summarize
from host.tools import ToolRegistry, ToolRunContext, ToolsConfig, define_tool

CALLS_PER_ROUND = 500


def _sync(args: Any, ctx: ToolRunContext) -> int:
    return 1


async def _async(args: Any, ctx: ToolRunContext) -> int:
    return 1


def _registry(execute: Any, timeout_ms: int | None) -> ToolRegistry:
    registry = ToolRegistry(ToolsConfig(mode="code"))
    registry.register(
        define_tool(name="t", description="", parameters={}, execute=execute, timeout_ms=timeout_ms)
    )
    return registry


async def _per_call_us(registry: ToolRegistry) -> float:
    started = time.perf_counter()
    for _ in range(CALLS_PER_ROUND):
        await registry.invoke("t", {})
    return (time.perf_counter() - started) / CALLS_PER_ROUND * 1e6


async def _main(rounds: int) -> None:
    print(f"{machine_label(machine_info())}; {rounds} rounds of {CALLS_PER_ROUND} calls\n")
    print("| tool | timeout_ms | p50 µs/call | p95 µs/call |")
    print("|---|---|---|---|")
    for label, execute in (("sync", _sync), ("async", _async)):
        plain, timed = _registry(execute, None), _registry(execute, 60_000)
        for registry in (plain, timed):
            await _per_call_us(registry)  # warm-up
        seen: dict[str, list[float]] = {"none": [], "60 000": []}
        for _ in range(rounds):
            seen["none"].append(await _per_call_us(plain))
            seen["60 000"].append(await _per_call_us(timed))
        for timeout, values in seen.items():
            stats = summarize(values)
            print(f"| {label} | {timeout} | {stats['p50']:.1f} | {stats['p95']:.1f} |")


def main() -> None:
    """Print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=20, help="interleaved rounds (default 20)")
    args = parser.parse_args()
    if args.rounds < 1:
        parser.error("--rounds must be at least 1")
    anyio.run(_main, args.rounds)


if __name__ == "__main__":
    main()
