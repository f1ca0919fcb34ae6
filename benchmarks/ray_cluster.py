"""What running on a Ray cluster costs: RayRuntime against a local SubprocessRuntime.

Starts a local cluster on this machine (a head node with ``ray start``; a second node for
the two-node figures), or uses ``--address``. Measures, interleaved run by run with a
local ``SubprocessRuntime()`` so that load hits both alike: trivial runs (a fresh program
text each time), then runs of 10 sequential awaited binding calls, p50/p95 over ``--runs``
samples each, and from them the overhead per run and per call, beside Ray's own floor
(an actor call there and back); then throughput (runs/s with
``--concurrency`` runs in flight for ``--seconds``) through 1 and 2 nodes and locally,
with the caller's own CPU per run (its process time over the batch: Ray's threads in this
process included) and that of the nodes' actors (their processes, not the children). Prints a markdown table; ``--json FILE`` keeps every
figure. Usage: ``python benchmarks/ray_cluster.py [--runs N] [--seconds S]
[--concurrency C] [--address ADDR] [--json FILE]``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._common import machine_info, summarize
from host.cluster import RayRuntime
from host.cluster._ray import wait_future
from host.sandbox import SubprocessRuntime
from runtime import CodeRuntime, RunRequest

CALLS = 10
_TRIVIAL = "return {i}"
_CALLING = "for j in range(" + str(CALLS) + "):\n    await echo(j=j)\nreturn {i}"


async def _echo(args: Any) -> Any:
    return args


def _request(template: str, i: int) -> RunRequest:
    return RunRequest(program=template.format(i=i), bindings={"echo": _echo})


async def _timed(runtime: CodeRuntime, template: str, i: int) -> float:
    start = time.perf_counter()
    result = await runtime.run(_request(template, i))
    took = (time.perf_counter() - start) * 1000
    if not result.ok:
        raise RuntimeError(f"a benchmark run failed: {result.error}")
    return took


async def overhead(ray_rt: RayRuntime, local: SubprocessRuntime, runs: int) -> dict[str, Any]:
    """Trivial runs, then 10-call runs: each a Ray run and a local run in turn."""
    samples: dict[str, list[float]] = {
        "ray trivial": [],
        "local trivial": [],
        "ray 10 calls": [],
        "local 10 calls": [],
    }
    for kind, template in (("trivial", _TRIVIAL), ("10 calls", _CALLING)):
        for _ in range(10):  # warm both up: spares forked, code paths loaded
            for rt in (ray_rt, local):
                await _timed(rt, template, 0)
        for i in range(runs):
            samples[f"ray {kind}"].append(await _timed(ray_rt, template, i))
            samples[f"local {kind}"].append(await _timed(local, template, i))
    # Ray's own floor: one actor call there and back (a ping of a node's actor)
    actor = ray_rt._pool.ready_nodes()[0].actor
    pings = []
    for _ in range(runs):
        start = time.perf_counter()
        await wait_future(ray_rt._backend.ping(actor))
        pings.append((time.perf_counter() - start) * 1000)
    out: dict[str, Any] = {name: summarize(s) for name, s in samples.items()}
    out["ray actor call round trip"] = summarize(pings)
    run_over = [
        r - lo for r, lo in zip(samples["ray trivial"], samples["local trivial"], strict=True)
    ]
    call_over = [
        ((rc - rt) - (lc - lt)) / CALLS
        for rc, rt, lc, lt in zip(
            samples["ray 10 calls"],
            samples["ray trivial"],
            samples["local 10 calls"],
            samples["local trivial"],
            strict=True,
        )
    ]
    out["overhead per run"] = summarize(run_over)
    out["overhead per call"] = summarize(call_over)
    out["p50 overhead per run"] = out["ray trivial"]["p50"] - out["local trivial"]["p50"]
    out["p50 overhead per call"] = (
        (out["ray 10 calls"]["p50"] - out["ray trivial"]["p50"])
        - (out["local 10 calls"]["p50"] - out["local trivial"]["p50"])
    ) / CALLS
    return out


async def throughput(
    runtime: CodeRuntime, template: str, seconds: float, concurrency: int
) -> dict[str, Any]:
    """Runs per second with ``concurrency`` runs in flight; the caller's CPU per run."""
    done = 0
    latencies: list[float] = []
    stop_at = time.monotonic() + seconds

    async def client(k: int) -> None:
        nonlocal done
        i = k
        while time.monotonic() < stop_at:
            latencies.append(await _timed(runtime, template, i))
            done += 1
            i += concurrency

    actors = _actor_processes(runtime)
    actor0 = _cpu_s(actors)
    cpu0, wall0 = time.process_time(), time.perf_counter()
    async with anyio.create_task_group() as tg:
        for k in range(concurrency):
            tg.start_soon(client, k)
    cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
    return {
        "runs": done,
        "runs per s": done / wall,
        "caller cpu ms per run": cpu * 1000 / max(done, 1),
        "actor cpu ms per run": (_cpu_s(actors) - actor0) * 1000 / max(done, 1),
        "latency ms": summarize(latencies),
    }


def _actor_processes(runtime: CodeRuntime) -> list[psutil.Process]:
    """The nodes' actor processes (their own CPU: not the children's), none for a local run."""
    if not isinstance(runtime, RayRuntime):
        return []
    return [psutil.Process(n.info.pid) for n in runtime._pool.ready_nodes() if n.info is not None]


def _cpu_s(processes: list[psutil.Process]) -> float:
    total = 0.0
    for proc in processes:
        times = proc.cpu_times()
        total += times.user + times.system
    return total


def _fmt(stats: dict[str, float]) -> str:
    return f"{stats['p50']:.2f} / {stats['p95']:.2f}"


async def measure(args: argparse.Namespace, cluster: Any) -> dict[str, Any]:
    report: dict[str, Any] = {"machine": machine_info(), "args": vars(args)}
    address = args.address or cluster.address
    async with RayRuntime(address) as ray_rt, SubprocessRuntime() as local:
        report["nodes at overhead"] = len(ray_rt.nodes)
        report["overhead"] = await overhead(ray_rt, local, args.runs)
        for name, template in (("trivial", _TRIVIAL), ("10 calls", _CALLING)):
            report[f"throughput local {name}"] = await throughput(
                local, template, args.seconds, args.concurrency
            )
            report[f"throughput 1 node {name}"] = await throughput(
                ray_rt, template, args.seconds, args.concurrency
            )
    if cluster is not None:
        await anyio.to_thread.run_sync(cluster.add_node)
        async with RayRuntime(address) as ray_rt:
            report["nodes at two-node throughput"] = len(ray_rt.nodes)
            for name, template in (("trivial", _TRIVIAL), ("10 calls", _CALLING)):
                report[f"throughput 2 nodes {name}"] = await throughput(
                    ray_rt, template, args.seconds, args.concurrency
                )
    report["machine"]["load_avg_at_end"] = os.getloadavg()
    return report


def _markdown(report: dict[str, Any]) -> str:
    o = report["overhead"]
    m = report["machine"]
    lines = [
        f"machine: {m.get('nproc')} cores, {m.get('cpu_model', '?')}; load average "
        f"{m.get('load_avg_at_start')} at start, {m.get('load_avg_at_end')} at end",
        "",
        "| workload | RayRuntime p50 / p95 ms | local p50 / p95 ms | overhead p50 ms |",
        "|---|---|---|---|",
        f"| trivial run | {_fmt(o['ray trivial'])} | {_fmt(o['local trivial'])} | "
        f"{o['p50 overhead per run']:.2f} per run |",
        f"| run with {CALLS} awaited calls | {_fmt(o['ray 10 calls'])} | "
        f"{_fmt(o['local 10 calls'])} | {o['p50 overhead per call']:.2f} per call |",
        "",
        f"paired overhead (each Ray sample minus the local one next to it): per run "
        f"{_fmt(o['overhead per run'])} ms, per call {_fmt(o['overhead per call'])} ms "
        f"(p50 / p95 over {o['overhead per run']['n']} pairs); Ray's own floor, one actor "
        f"call there and back: {_fmt(o['ray actor call round trip'])} ms",
        "",
        f"| throughput ({report['args']['concurrency']} in flight, "
        f"{report['args']['seconds']:g} s) | runs/s | caller CPU ms per run | "
        "nodes' actors' CPU ms per run | latency p50 / p95 ms |",
        "|---|---|---|---|---|",
    ]
    for key, value in report.items():
        if key.startswith("throughput "):
            lines.append(
                f"| {key.removeprefix('throughput ')} | {value['runs per s']:.0f} | "
                f"{value['caller cpu ms per run']:.2f} | {value['actor cpu ms per run']:.2f} | "
                f"{_fmt(value['latency ms'])} |"
            )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=200, help="samples per overhead figure")
    parser.add_argument("--seconds", type=float, default=10.0, help="length of a throughput run")
    parser.add_argument("--concurrency", type=int, default=16, help="runs in flight")
    parser.add_argument("--address", help="an existing cluster (host:port) instead of a local one")
    parser.add_argument("--json", type=Path, help="write every figure to this file")
    args = parser.parse_args()
    cluster = None
    if args.address is None:
        from tests.host.cluster.local_cluster import LocalCluster

        cluster = LocalCluster()
        os.environ["RAY_AUTH_MODE"] = "token"
        os.environ["RAY_AUTH_TOKEN"] = cluster.env["RAY_AUTH_TOKEN"]
        cluster.start_head()
    try:
        report = anyio.run(_in_thread_init, args, cluster)
    finally:
        if cluster is not None:
            left = cluster.stop()
            if left:
                print(f"warning: Ray processes left: {left}", file=sys.stderr)
    print(_markdown(report))
    if args.json is not None:
        args.json.write_text(json.dumps(report, indent=2, default=str))


async def _in_thread_init(args: argparse.Namespace, cluster: Any) -> dict[str, Any]:
    # connect once for the whole benchmark, so no RayRuntime disconnects between sections
    from host.cluster._ray import RayBackend

    backend = RayBackend()
    address = args.address or cluster.address
    await anyio.to_thread.run_sync(backend.connect, address, {})
    try:
        return await measure(args, cluster)
    finally:
        await anyio.to_thread.run_sync(backend.shutdown)


if __name__ == "__main__":
    main()
