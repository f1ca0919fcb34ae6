"""Hostile runs against their neighbours: the kernel's per-uid quotas and the calls on others."""

from __future__ import annotations

import os
from typing import Any

import anyio
import pytest

from host.sandbox import SubprocessRuntime
from runtime import Binding, RunRequest, RunResult
from tests.host.sandbox.hostile import HOSTILE, ONE_BACKEND

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.skipif(os.geteuid() != 0, reason="runs have uids of their own on a root host"),
]


async def _beside(
    rt: SubprocessRuntime, hog: str, victim: str, hog_inputs: dict[str, Any] | None = None
) -> tuple[RunResult, RunResult]:
    """Run ``hog`` until it has taken what it takes (it calls ``tools.held()``), then
    ``victim`` beside it (it gets the hog's pid as ``hog_pid``); both results."""
    held = anyio.Event()
    done = anyio.Event()
    results: dict[str, RunResult] = {}
    hog_pid: list[int] = []

    async def on_held(args: Any) -> None:
        hog_pid.append(args["pid"])
        held.set()
        await done.wait()  # the hog keeps what it took until the victim has run

    async def run(
        name: str, program: str, bindings: dict[str, Binding], inputs: dict[str, Any]
    ) -> None:
        results[name] = await rt.run(
            RunRequest(program=program, bindings=bindings, inputs=inputs, limits=HOSTILE)
        )

    async with anyio.create_task_group() as tg:
        bindings: dict[str, Binding] = {"tools.held": on_held}
        tg.start_soon(run, "hog", hog, bindings, hog_inputs or {})
        with anyio.fail_after(10):
            await held.wait()
        try:
            await run("victim", victim, {}, {"hog_pid": hog_pid[0]})
        finally:
            done.set()
    return results["hog"], results["victim"]


@ONE_BACKEND
async def test_concurrent_runs_and_the_spare_each_have_a_uid_of_their_own(
    rt: SubprocessRuntime,
) -> None:
    arrived = 0
    everyone = anyio.Event()

    async def meet(args: Any) -> None:
        nonlocal arrived
        arrived += 1
        if arrived == 3:
            everyone.set()
        await everyone.wait()

    program = "import os\nawait tools.meet()\nreturn os.getresuid()[0]"
    uids: list[int] = []

    async def one() -> None:
        result = await rt.run(
            RunRequest(program=program, bindings={"tools.meet": meet}, limits=HOSTILE)
        )
        assert result.error is None, result.error
        uids.append(result.value)

    async with anyio.create_task_group() as tg:
        for _ in range(3):
            tg.start_soon(one)
    assert len(set(uids)) == 3, uids
    assert 0 not in uids
    spare = rt._spares[0] if rt._spares else None
    assert spare is None or spare.uid not in uids


_SETUP_NEEDS = "return 'ran'"


@ONE_BACKEND
async def test_a_run_that_fills_the_pending_signal_queue_starves_no_other_run(
    rt: SubprocessRuntime,
) -> None:
    # Every child arms a POSIX CPU timer at set-up; timer_create() fails once the pending
    # signals of the uid reach RLIMIT_SIGPENDING: runs sharing a uid then died at set-up.
    hog = """\
import ctypes, os, signal
libc = ctypes.CDLL(None, use_errno=True)
signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGRTMIN])
queued = 0
while libc.sigqueue(os.getpid(), signal.SIGRTMIN, 0) == 0:
    queued += 1
    if queued > 2_000_000:
        break
await tools.held(pid=os.getpid())
return queued
"""
    hogged, victim = await _beside(rt, hog, _SETUP_NEEDS)
    assert hogged.error is None and hogged.value > 1000, hogged
    assert victim.error is None and victim.value == "ran", victim.error


@ONE_BACKEND
async def test_a_run_that_takes_every_inotify_instance_starves_no_other_run(
    rt: SubprocessRuntime,
) -> None:
    hog = """\
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
held = []
while (fd := libc.inotify_init()) >= 0 and len(held) < 10_000:
    held.append(fd)
await tools.held(pid=os.getpid())
return len(held)
"""
    victim = """\
import ctypes
fd = ctypes.CDLL(None, use_errno=True).inotify_init()
return fd >= 0
"""
    hogged, after = await _beside(rt, hog, victim)
    assert hogged.error is None and hogged.value > 0, hogged
    assert after.value is True, after


@ONE_BACKEND
async def test_a_run_cannot_change_another_runs_limits_priority_or_affinity(
    rt: SubprocessRuntime,
) -> None:
    # The hog waits; the attacker (given its pid, as a guess would) tries the calls the kernel
    # checks only by uid; the hog then reports what it has.
    hog = """\
import os, resource
await tools.held(pid=os.getpid())
return [resource.getrlimit(resource.RLIMIT_NOFILE)[0], os.getpriority(os.PRIO_PROCESS, 0),
        len(os.sched_getaffinity(0))]
"""
    attacker = """\
import os, resource
refused = []
tries = {
    'prlimit': lambda: resource.prlimit(hog_pid, resource.RLIMIT_NOFILE, (16, 16)),
    'prlimit_read': lambda: resource.prlimit(hog_pid, resource.RLIMIT_NOFILE),
    'setpriority': lambda: os.setpriority(os.PRIO_PROCESS, hog_pid, 19),
    'setpriority_user': lambda: os.setpriority(os.PRIO_USER, 0, 19),
    'affinity': lambda: os.sched_setaffinity(hog_pid, {0}),
    'scheduler': lambda: os.sched_setscheduler(hog_pid, os.SCHED_IDLE, os.sched_param(0)),
}
for name, attempt in tries.items():
    try:
        attempt()
    except OSError:
        refused.append(name)
return sorted(refused)
"""
    before = await rt.run(RunRequest(program=hog.replace("await tools.held(pid=os.getpid())", "")))
    hogged, attacked = await _beside(rt, hog, attacker)
    assert attacked.value == sorted(
        [
            "prlimit",
            "prlimit_read",
            "setpriority",
            "setpriority_user",
            "affinity",
            "scheduler",
        ]
    ), attacked
    assert hogged.value == before.value, (hogged, before)


@ONE_BACKEND
async def test_a_thread_reads_its_own_scheduling_by_thread_id(rt: SubprocessRuntime) -> None:
    # libc's pthread_getattr_np asks for the calling thread's affinity by its thread id, not 0:
    # a filter that refused that broke every runtime whose threads ask (Deno's do).
    program = """\
import os, threading
seen = []
def ask():
    tid = threading.get_native_id()
    seen.append([tid != os.getpid(), len(os.sched_getaffinity(tid)) > 0,
                 os.sched_getscheduler(tid), os.getpriority(os.PRIO_PROCESS, tid)])
t = threading.Thread(target=ask)
t.start(); t.join()
return seen
"""
    result = await rt.run(RunRequest(program=program, limits=HOSTILE))
    assert result.value == [[True, True, os.SCHED_OTHER, 0]], result
