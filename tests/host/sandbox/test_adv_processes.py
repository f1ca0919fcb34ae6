"""Hostile programs that multiply: fork bombs, daemons, threads."""

from __future__ import annotations

import socket
import time

import anyio
import pytest

from host.sandbox import SubprocessRuntime
from runtime import Limits, RunRequest
from tests.host.sandbox.conftest import checked_runtime
from tests.host.sandbox.hostile import (
    HOSTILE,
    ONE_BACKEND,
    expect,
    gap,
    probe_is_clean,
    run_hostile,
)

pytestmark = pytest.mark.anyio


# ---- fork bombs, daemons, threads -----------------------------------------------------------

_DEADLINE = "import time as _t\n_END = _t.monotonic() + 4\n"  # every bomb stops itself after 4 s


@ONE_BACKEND
async def test_a_linear_fork_loop_is_stopped_by_the_compute_budget_or_the_process_cap(
    rt: SubprocessRuntime,
) -> None:
    program = _DEADLINE + (
        "import os\n"
        "while _t.monotonic() < _END:\n"
        "    if os.fork() == 0:\n"
        "        while _t.monotonic() < _END:\n"
        "            _t.sleep(0.05)\n"
        "        os._exit(0)\n"
    )
    result = await run_hostile(rt, program, limits=Limits(compute_ms=500, max_wall_ms=3_000))
    if result.error is not None and result.error.kind == "exception":
        # the process cap came first: fork() failed, uncaught
        assert "pids" in rt.cgroups, result.error
        assert result.error.exception_type == "BlockingIOError"
    else:
        expect(result, "budget", "compute")


@ONE_BACKEND
async def test_an_exponential_fork_bomb_settles_and_leaves_nothing(rt: SubprocessRuntime) -> None:
    program = _DEADLINE + (
        "import os\n"
        "while _t.monotonic() < _END:\n"
        "    try:\n        os.fork()\n    except OSError:\n        pass\n"
    )
    result = await run_hostile(rt, program, limits=Limits(compute_ms=500, max_wall_ms=3_000))
    expect(result, "budget")


@ONE_BACKEND
async def test_a_setsid_fork_bomb_settles_and_leaves_nothing(
    request: pytest.FixtureRequest, rt: SubprocessRuntime
) -> None:
    gap(
        request,
        rt.isolation,
        "a fork bomb whose children setsid() outruns kill_tree (descendant walk + killpg, "
        "racing the forks) and starves the host's budget poll on 2 cores: run() returns "
        "seconds past the wall budget and bomb processes outlive it",
        closed_by_cgroups="kill",
        base="without cgroup.kill",
    )
    program = (
        "import os, time as _t\n"
        "_END = _t.monotonic() + 3\n"  # the bomb stops itself after 3 s
        "while _t.monotonic() < _END:\n"
        "    try:\n"
        "        if os.fork() == 0:\n            os.setsid()\n"
        "    except OSError:\n        pass\n"
    )
    start = time.monotonic()
    result = await run_hostile(rt, program, limits=Limits(compute_ms=300, max_wall_ms=1_500))
    elapsed = time.monotonic() - start
    expect(result, "budget")
    assert elapsed < 2.5, f"run() returned {elapsed:.1f} s after it started"
    assert result.stats is not None and result.stats.compute_ms < 1_500, result.stats


@ONE_BACKEND
async def test_a_setsid_double_fork_daemon_is_gone_when_the_run_returns(
    rt: SubprocessRuntime,
) -> None:
    program = _DEADLINE + (
        "import os, signal\n"
        "if os.fork() == 0:\n"
        "    os.setsid()\n"
        "    if os.fork() == 0:\n"
        "        for s in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):\n"
        "            signal.signal(s, signal.SIG_IGN)\n"
        "        os.close(1); os.close(2)\n"
        "        while _t.monotonic() < _END:\n"
        "            _t.sleep(0.01)\n"
        "    os._exit(0)\n"
        "_t.sleep(0.2)\n"
        "return 1\n"
    )
    result = await run_hostile(rt, program)
    assert result.value == 1


@ONE_BACKEND
async def test_a_daemon_sends_nothing_once_the_run_has_returned(
    workdir_root: str, isolation: str
) -> None:
    # What it does, not what /proc says: a setsid() daemon sends a datagram every
    # millisecond to a socket of the host (the process level with network shares the host's
    # loopback).
    if isolation != "process":
        pytest.skip("the namespaces level has no network to send on")
    async with checked_runtime(workdir_root, isolation=isolation, network=True) as rt:
        await _daemon_sends_nothing_after(rt)


async def _daemon_sends_nothing_after(rt: SubprocessRuntime) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as inbox:
        inbox.bind(("127.0.0.1", 0))
        inbox.setblocking(False)
        program = _DEADLINE + (
            "import os, socket\n"
            "if os.fork() == 0:\n"
            "    os.setsid()\n"
            "    out = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
            "    while _t.monotonic() < _END:\n"
            "        try:\n"
            f"            out.sendto(b'x', ('127.0.0.1', {inbox.getsockname()[1]}))\n"
            "        except OSError:\n"
            "            pass\n"
            "        _t.sleep(0.001)\n"
            "    os._exit(0)\n"
            "_t.sleep(0.1)\n"
            "return 1\n"
        )
        result = await rt.run(RunRequest(program=program, limits=HOSTILE))
        assert result.value == 1, result.error
        assert _drain(inbox) > 0  # it was sending while the run ran (no await since)
        await anyio.sleep(0.3)
        assert _drain(inbox) == 0, "a process of the run sent after run() returned"


def _drain(inbox: socket.socket) -> int:
    count = 0
    while True:
        try:
            inbox.recv(16)
        except BlockingIOError:
            return count
        count += 1


@ONE_BACKEND
async def test_a_pid_hopping_daemon_does_not_outlive_the_run(rt: SubprocessRuntime) -> None:
    # Each generation forks the next and exits: the daemon's pid keeps changing.
    program = _DEADLINE + (
        "import os\n"
        "if os.fork() == 0:\n"
        "    os.setsid()\n"
        "    while _t.monotonic() < _END:\n"
        "        if os.fork() != 0:\n            os._exit(0)\n"
        "    os._exit(0)\n"
        "_t.sleep(0.3)\n"
        "return 1\n"
    )
    result = await run_hostile(rt, program)
    assert result.value == 1


@ONE_BACKEND
async def test_a_thousand_threads_go_with_the_run(rt: SubprocessRuntime) -> None:
    program = (
        "import threading, time\n"
        "threading.stack_size(64 << 10)\n"
        "for _ in range(1000):\n"
        "    threading.Thread(target=time.sleep, args=(60,)).start()\n"
        "return threading.active_count()\n"
    )
    result = await run_hostile(rt, program, limits=Limits(compute_ms=2_000, max_wall_ms=5_000))
    assert result.value == 1001


@ONE_BACKEND
async def test_a_non_daemon_thread_that_never_ends_does_not_delay_the_result(
    rt: SubprocessRuntime,
) -> None:
    program = (
        "import threading, time\n"
        "threading.Thread(target=time.sleep, args=(600,)).start()\n"
        "threading.Thread(target=lambda: [None for _ in iter(int, 1)]).start()\n"
        "return 'done'\n"
    )
    start = time.monotonic()
    result = await run_hostile(rt, program, probe=False)
    assert result.value == "done"
    assert time.monotonic() - start < 2.5
    await probe_is_clean(rt)


@ONE_BACKEND
async def test_an_atexit_handler_that_hangs_does_not_delay_the_result(
    rt: SubprocessRuntime,
) -> None:
    program = "import atexit, time\natexit.register(time.sleep, 600)\nreturn 'done'"
    start = time.monotonic()
    result = await run_hostile(rt, program, probe=False)
    assert result.value == "done"
    assert time.monotonic() - start < 2.0
    await probe_is_clean(rt)


@ONE_BACKEND
async def test_sys_exit_in_a_thread_does_not_end_the_program(rt: SubprocessRuntime) -> None:
    program = (
        "import sys, threading\n"
        "t = threading.Thread(target=sys.exit, args=(3,))\n"
        "t.start(); t.join()\n"
        "return 'still here'\n"
    )
    result = await run_hostile(rt, program)
    assert result.value == "still here"
