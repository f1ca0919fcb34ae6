"""A soak of mixed runs: the host's fds, threads, children and memory stay flat."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from typing import Any

import psutil
import pytest

from host.sandbox import SubprocessRuntime
from host.sandbox._rooms import ROOMS_AHEAD
from runtime import Limits, RunRequest, RunResult
from tests.host.sandbox.conftest import live_children, open_fds, settled

FULL = os.environ.get("DSH_SOAK_FULL") == "1"
RUNS = 2_000 if FULL else 150
WARMUP = 40
#: RSS the host may gain over the soak (allocator noise, interned strings, caches).
RSS_SLACK = (48 if FULL else 24) << 20

pytestmark = [pytest.mark.anyio, pytest.mark.slow, pytest.mark.timeout(900 if FULL else 60)]

_BASE = Limits(compute_ms=2_000, max_wall_ms=5_000)


async def _add(args: Any) -> Any:
    return args["a"] + args["b"]


def _ok(expected: Any) -> Callable[[RunResult], bool]:
    return lambda r: r.error is None and r.value == expected


def _failed(kind: str) -> Callable[[RunResult], bool]:
    return lambda r: r.error is not None and r.error.kind == kind


#: (name, program, limits, check): one of each per cycle.
_MIX: list[tuple[str, str, Limits, Callable[[RunResult], bool]]] = [
    ("success", "print('hi')\nreturn {'n': [1, 2.5, None]}", _BASE, _ok({"n": [1, 2.5, None]})),
    ("exception", "def f():\n    raise ValueError('x')\nf()", _BASE, _failed("exception")),
    (
        "bindings",
        "import asyncio\nreturn await asyncio.gather(*(tools.add(a=i, b=1) for i in range(5)))",
        _BASE,
        _ok([1, 2, 3, 4, 5]),
    ),
    (
        "budget",
        "while True:\n    pass",
        Limits(compute_ms=30, max_wall_ms=5_000),
        _failed("budget"),
    ),
    ("died", "import os\nos._exit(5)", _BASE, _failed("died")),
    (
        "output_limit",
        "for _ in range(100):\n    print('x' * 100)",
        Limits(compute_ms=2_000, max_wall_ms=5_000, max_output_bytes=1_000),
        _failed("output_limit"),
    ),
    ("invalid", "return (1, 2)", _BASE, _failed("invalid_completion")),
    (
        "daemon",
        "import os, time\nif os.fork() == 0:\n    os.setsid()\n    time.sleep(600)\n    os._exit(0)\nreturn 1",
        _BASE,
        _ok(1),
    ),
    ("wall", "import time\ntime.sleep(5)", Limits(max_wall_ms=30), _failed("budget")),
]


def _template_children(rt: SubprocessRuntime) -> int:
    """Live direct children of the template: the spares (strays would be reparented here)."""
    template = rt._template
    if template is None or template.pid is None:
        return 0
    return len(live_children(template.pid))


def _threads() -> tuple[int, int]:
    return threading.active_count(), psutil.Process().num_threads()


async def test_mixed_runs_keep_fds_threads_children_and_memory_flat(rt: SubprocessRuntime) -> None:
    me = psutil.Process()
    baseline: dict[str, Any] = {}
    kinds: dict[str, int] = {}
    for i in range(RUNS):
        name, program, limits, check = _MIX[i % len(_MIX)]
        result = await rt.run(
            RunRequest(program=program, limits=limits, bindings={"tools.add": _add})
        )
        assert check(result), f"run {i} ({name}): {result}"
        kinds[name] = kinds.get(name, 0) + 1
        if i + 1 == WARMUP:
            await settled(rt)
            baseline = {
                "fds": open_fds(but_cgroups=True),
                "threads": _threads(),
                "rss": me.memory_info().rss,
            }
    assert len(kinds) == len(_MIX)
    await settled(rt)
    # as many as after the warm-up: a spare's pipes may change numbers, not count
    assert len(open_fds(but_cgroups=True)) == len(baseline["fds"])
    cgroups = rt._rooms.cgroups
    if cgroups is not None:  # cgroups kept for reuse: no more than runs (and rooms) can overlap
        assert len(cgroups._free) <= rt._max_concurrent + rt._prefork + ROOMS_AHEAD
    # No thread may be added; one may go: an idle worker of anyio's thread pool (a runtime
    # makes its cgroups in one when it starts) exits after 10 s without work.
    threads, os_threads = _threads()
    assert threads <= baseline["threads"][0] and os_threads <= baseline["threads"][1]
    assert [c.pid for c in me.children()] == [rt._template.pid if rt._template else None]
    spares: int = getattr(rt, "_prefork", 1)
    assert _template_children(rt) <= spares
    grown = me.memory_info().rss - baseline["rss"]
    assert grown < RSS_SLACK, f"the host's RSS grew by {grown >> 20} MiB over {RUNS} runs"
