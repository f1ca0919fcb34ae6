"""Section 14: what a hostile run costs the host, and budgets the host cannot delay (issue 23).

- Worst-shaped results: ``return [{}] * 333_000`` (~1 MB: decoded, under
  ``max_json_values``), and a result frame the program forges on the bridge of ~64 MB of
  ``{},`` (22 million values: refused undecoded, ``output_limit``; the child's own checks
  would take the program longer than that to pass): the host's peak RSS growth over the run
  (``RssPeak``, as in the flood section) and the longest stall of its event loop (a task
  sleeping 1 ms in a loop: the most it woke late).
- Budgets while the host holds its interpreter for 5 s (a busy loop on the event loop's thread
  with a switch interval longer than the hold, so no other thread of the host runs): a
  compute budget of 300 ms with the program's SIGXCPU blocked (only a watchdog can stop it),
  the compute billed; a wall budget of 1,000 ms, when the program was stopped (its last
  printed clock, from ``run()`` called).
- A sync tool deaf to its abort (blocked 20 s) under ``max_wall_ms=2000``: ``run()``
  called to returned.
"""

from __future__ import annotations

import sys
import threading
import time
from typing import Any

import anyio

from benchmarks._common import DSH, Config, Row, Section, Target
from benchmarks._flood import RssPeak
from host.sandbox import SubprocessRuntime
from host.tools import ToolRegistry, ToolsConfig, tool
from runtime import Limits, RunRequest, RunResult

__all__ = ("run",)

HOLD_S = 5.0
#: A program that writes a result frame of ``n`` empty dicts straight to the bridge, as a
#: hostile child may (the bridge's write end found by its access mode), then waits.
FORGED = """\
import fcntl, os, select, struct, time
def _out():
    for name in os.listdir('/proc/self/fd'):
        fd = int(name)
        try:
            flags = fcntl.fcntl(fd, fcntl.F_GETFL)
        except OSError:
            continue
        if fd > 2 and flags & os.O_ACCMODE == os.O_WRONLY and os.readlink(
            f'/proc/self/fd/{{fd}}').startswith('pipe:'):
            return fd
body = b'{{"type":"Done","has_value":true,"value":[' + b'{{}},' * ({n} - 1) + b'{{}}]}}'
data, out = memoryview(struct.pack("!I", len(body)) + body), _out()
while data:
    try:
        data = data[os.write(out, data):]
    except BlockingIOError:
        select.select([], [out], [])
time.sleep(30)
"""
SHAPES = {
    "~1 MB": (333_000, "return [{{}}] * {n}"),
    "~64 MB, forged": (22_000_000, FORGED),
}
COMPUTE = (
    "import signal\nsignal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGXCPU])\n"
    "await tools.started()\nwhile True:\n    pass\n"
)
WALL = (
    "import time\nawait tools.started()\n"
    "while True:\n    print(time.monotonic(), flush=True)\n    time.sleep(0.02)\n"
)


def _hold_the_interpreter(seconds: float) -> None:
    """Busy on this thread, no other thread of the host let in (the switch interval)."""
    old = sys.getswitchinterval()
    sys.setswitchinterval(seconds * 10)
    try:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            pass
    finally:
        sys.setswitchinterval(old)


async def _worst_shape(
    rt: SubprocessRuntime, n: int, program: str, rss_row: Row, stall_row: Row
) -> None:
    done = anyio.Event()
    worst = [0.0]

    async def ticker() -> None:
        while not done.is_set():
            t = time.perf_counter()
            await anyio.sleep(0.001)
            worst[0] = max(worst[0], (time.perf_counter() - t) * 1000 - 1)

    result: list[RunResult] = []

    async def flood() -> None:
        try:
            limits = Limits(
                max_wall_ms=30_000, compute_ms=30_000, max_heap_mb=1024, max_output_bytes=64 << 20
            )
            request = RunRequest(program=program.format(n=n), limits=limits)
            result.append(await rt.run(request))
        finally:
            done.set()

    with RssPeak() as rss:
        async with anyio.create_task_group() as tg:
            tg.start_soon(ticker)
            tg.start_soon(flood)
    (r,) = result
    kind = r.error.kind if r.error is not None else "value"
    rss_row.facts.setdefault("outcomes", {}).setdefault(kind, 0)
    rss_row.facts["outcomes"][kind] += 1
    ok = (r.error is None and len(r.value) == n) or (
        r.error is not None and r.error.kind == "output_limit"
    )
    if not ok:
        rss_row.failures += 1
        stall_row.failures += 1
        return
    rss_row.metrics["value"].append(rss.growth_mib)
    stall_row.metrics["value"].append(worst[0])


async def _while_held(
    rt: SubprocessRuntime, program: str, limits: Limits
) -> tuple[RunResult, float]:
    started = anyio.Event()
    results: list[RunResult] = []

    async def on_start(args: Any) -> None:
        started.set()

    async def go() -> None:
        request = RunRequest(program=program, bindings={"tools.started": on_start}, limits=limits)
        results.append(await rt.run(request))

    await rt.run(RunRequest(program="1"))  # a spare waits: the run starts at once
    began = time.monotonic()
    async with anyio.create_task_group() as tg:
        tg.start_soon(go)
        with anyio.fail_after(10):
            await started.wait()
        await anyio.sleep(0.02)
        _hold_the_interpreter(HOLD_S)
    return results[0], began


def _budget_failed(r: RunResult, budget: str) -> bool:
    return r.error is not None and r.error.kind == "budget" and r.error.budget == budget


async def _stuck_tool(row: Row) -> None:
    from host.codemode import CodeMode, CodeModeConfig

    release = threading.Event()

    @tool
    def stall() -> int:
        """Block a worker thread, deaf to the abort."""
        release.wait(20)
        return 0

    registry = ToolRegistry(ToolsConfig(mode="code"))
    registry.register(stall)
    try:
        async with SubprocessRuntime() as rt:
            codemode = CodeMode(registry, rt, CodeModeConfig(limits=Limits(max_wall_ms=2000)))
            t = time.perf_counter()
            r = await codemode.run_program("return await tools.stall()")
            elapsed = (time.perf_counter() - t) * 1000
    finally:
        release.set()  # the abandoned thread ends
    if _budget_failed(r, "wall"):
        row.metrics["value"].append(elapsed)
    else:
        row.failures += 1
        row.facts["unexpected"] = str(r.error)[:200]


async def run(config: Config) -> Section:
    section = Section(
        "hostile",
        "14. A hostile run against the host",
        "Worst-shaped results (host RSS, event-loop stall), budgets while the host holds its "
        f"interpreter for {HOLD_S:.0f} s, and a run with a stuck sync tool.",
    )
    reps = config.n(1, 5)
    shapes = {
        label: (
            section.add(
                Row(f"return [{{}}] * {n:,} ({label}): host RSS growth", DSH, "MiB", {"value": []})
            ),
            section.add(
                Row(
                    f"return [{{}}] * {n:,} ({label}): longest event-loop stall",
                    DSH,
                    "ms",
                    {"value": []},
                )
            ),
        )
        for label, (n, _) in SHAPES.items()
    }
    compute = section.add(
        Row(
            f"compute budget 300 ms, SIGXCPU blocked, host held {HOLD_S:.0f} s: compute billed",
            DSH,
            "ms",
            {"value": []},
        )
    )
    wall = section.add(
        Row(
            f"wall budget 1,000 ms, host held {HOLD_S:.0f} s: program stopped after",
            DSH,
            "ms",
            {"value": []},
        )
    )
    stuck = section.add(
        Row(
            "sync tool blocked 20 s, max_wall_ms=2000: run() called to returned",
            DSH,
            "ms",
            {"value": []},
        )
    )
    async with SubprocessRuntime() as rt:
        await rt.run(RunRequest(program="1"))
        for _ in range(reps):
            for label, (n, program) in SHAPES.items():
                await _worst_shape(rt, n, program, *shapes[label])
            r, _ = await _while_held(rt, COMPUTE, Limits(compute_ms=300, max_wall_ms=20_000))
            if _budget_failed(r, "compute") and r.stats is not None:
                compute.metrics["value"].append(r.stats.compute_ms)
            else:
                compute.failures += 1
            r, began = await _while_held(rt, WALL, Limits(compute_ms=20_000, max_wall_ms=1000))
            if _budget_failed(r, "wall") and r.logs:
                wall.metrics["value"].append((float(r.logs[-1]) - began) * 1000)
            else:
                wall.failures += 1
    for _ in range(config.n(1, 2)):
        await _stuck_tool(stuck)
    compute.target = Target("max", "<=", 300 + 50, what="compute budget, host held (containment)")
    wall.target = Target("max", "<=", 1000 + 50, what="wall budget, host held (containment)")
    stuck.target = Target("max", "<=", 2000 + 500, what="a stuck sync tool (containment)")
    section.notes += [
        "Both worst shapes fail nothing in the host: ~1 MB is decoded (333,000 values, under "
        "max_json_values), ~64 MB is refused before decoding (output_limit).",
        "The wall row is the program's own last printed clock (it prints every 20 ms), so it "
        "says when the program was stopped, not when the held host came back to report it.",
    ]
    return section
