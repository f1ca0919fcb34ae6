"""Hostile programs that signal the host, the template and sibling children."""

from __future__ import annotations

import os
import signal
from typing import Any

import anyio
import psutil
import pytest

from host.sandbox import SubprocessRuntime
from runtime import RunRequest, RunResult
from tests.host.sandbox.conftest import settled
from tests.host.sandbox.hostile import (
    HOSTILE,
    ISOLATIONS,
    ONE_BACKEND,
    PROC_HELPERS,
    expect,
    gap,
    others,
    pids,
    probe_is_clean,
    run_hostile,
    run_in_separate_host,
)

pytestmark = pytest.mark.anyio


# ---- signalling the host, the template and sibling children -------------------------------


async def _until_stopped(pid: int) -> None:
    """SIGSTOP takes effect when the target is next scheduled: wait for state T."""
    with anyio.fail_after(2):
        while psutil.Process(pid).status() != psutil.STATUS_STOPPED:
            await anyio.sleep(0.005)


def _resume(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGCONT)
    except ProcessLookupError:
        pass  # the runtime replaced (and reaped) it


@ONE_BACKEND
async def test_killing_the_template_settles_the_run_and_the_next_run_is_clean(
    rt: SubprocessRuntime,
) -> None:
    program = (
        PROC_HELPERS + "import signal, time\nos.kill(TEMPLATE, signal.SIGKILL)\ntime.sleep(60)"
    )
    result = await run_hostile(rt, program, inputs=pids(rt))
    # killed (the child dies with it), or refused (an exception): either way the run settles
    assert result.error is not None and result.error.kind in ("died", "exception")


@ONE_BACKEND
async def test_stopping_the_template_does_not_wedge_later_runs(
    request: pytest.FixtureRequest, rt: SubprocessRuntime
) -> None:
    gap(request, rt.isolation, "the child SIGSTOPs its template", closed_by_landlock=6)
    program = PROC_HELPERS + (
        "import signal\n"
        "try:\n    os.kill(TEMPLATE, signal.SIGSTOP)\nexcept OSError:\n    return 'refused'\n"
        "return 'stopped'\n"
    )
    template = rt._template
    assert template is not None and template.pid is not None
    try:
        result = await run_hostile(rt, program, inputs=pids(rt), probe=False)
        for _ in range(3):
            await probe_is_clean(rt)
        assert result.value == "refused"
    finally:
        _resume(template.pid)  # our own template: let teardown be quick


@ONE_BACKEND
async def test_a_template_stopped_from_outside_is_replaced(rt: SubprocessRuntime) -> None:
    # What a child could do without Landlock signal scoping, done here by the test itself.
    await rt.run(RunRequest(program="1"))
    template = rt._template
    assert template is not None and template.pid is not None
    os.kill(template.pid, signal.SIGSTOP)
    try:
        await _until_stopped(template.pid)
        for _ in range(3):
            await probe_is_clean(rt)
    finally:
        _resume(template.pid)


@ONE_BACKEND
async def test_the_template_is_not_signalable_from_the_child(
    request: pytest.FixtureRequest, rt: SubprocessRuntime
) -> None:
    gap(request, rt.isolation, "the template can be signalled", closed_by_landlock=6)
    program = PROC_HELPERS + (
        "try:\n    os.kill(TEMPLATE, 0)\n    return 'signalable'\n"
        "except OSError as e:\n    return e.errno\n"
    )
    result = await run_hostile(rt, program, inputs=pids(rt))
    assert result.error is None and result.value != "signalable"


@ONE_BACKEND
async def test_the_host_is_not_visible_or_signalable_from_the_child(
    request: pytest.FixtureRequest, rt: SubprocessRuntime
) -> None:
    gap(request, rt.isolation, "the host pid can be signalled", closed_by_landlock=6)
    # Signal 0 only checks permission: the pytest process is never actually hit.
    program = PROC_HELPERS + (
        "try:\n    os.kill(HOST, 0)\n    return 'signalable'\n"
        "except OSError as e:\n    return e.errno\n"
    )
    result = await run_hostile(rt, program, inputs=pids(rt))
    assert result.error is None and result.value != "signalable"


@pytest.mark.parametrize("isolation", ISOLATIONS)
def test_sigkill_of_the_host_is_refused(request: pytest.FixtureRequest, isolation: str) -> None:
    gap(request, isolation, "SIGKILL of the host succeeds", closed_by_landlock=6)
    program = PROC_HELPERS + "import signal\nos.kill(HOST, signal.SIGKILL)\nreturn 1"
    host = run_in_separate_host(program, isolation)
    assert host.survived, f"the host died: exit {host.returncode}"


@pytest.mark.parametrize("isolation", ISOLATIONS)
def test_sigstop_of_the_host_is_refused(request: pytest.FixtureRequest, isolation: str) -> None:
    gap(request, isolation, "SIGSTOP of the host succeeds", closed_by_landlock=6)
    program = PROC_HELPERS + "import signal\nos.kill(HOST, signal.SIGSTOP)\nreturn 1"
    host = run_in_separate_host(program, isolation, timeout=8)
    assert host.survived, "the host was stopped and had to be resumed"


@ONE_BACKEND
async def test_killing_own_process_group_is_a_death_by_sigkill(rt: SubprocessRuntime) -> None:
    result = await run_hostile(rt, "import os, signal\nos.kill(0, signal.SIGKILL)\nreturn 'alive'")
    expect(result, "died")
    assert result.error is not None and result.error.exit_status == -9


@ONE_BACKEND
async def test_killing_the_spare_child_does_not_break_the_next_run(rt: SubprocessRuntime) -> None:
    await rt.run(RunRequest(program="1"))  # a spare is forked for the next run
    program = PROC_HELPERS + (
        "import signal\n"
        "KNOWN = await tools.others()\n"
        "hit = wait_for_siblings()\n"
        "for pid in hit:\n    try:\n        os.kill(pid, signal.SIGKILL)\n    except OSError:\n        pass\n"
        "return len(hit)\n"
    )
    result = await run_hostile(
        rt, program, inputs=pids(rt), bindings={"tools.others": others(rt)}
    )  # then: the next run is clean
    assert result.error is None
    # the run tried the spare (seen or given its pid), but in a PID namespace of its own
    assert result.value >= 1 if _host_pids(rt) else result.value == 0


@ONE_BACKEND
async def test_stopping_the_spare_child_does_not_wedge_the_next_run(
    request: pytest.FixtureRequest, rt: SubprocessRuntime
) -> None:
    gap(
        request,
        rt.isolation,
        "a run SIGSTOPs the spare child forked for the next run",
        closed_by_landlock=6,
    )
    await rt.run(RunRequest(program="1"))
    program = PROC_HELPERS + (
        "import signal\n"
        "KNOWN = await tools.others()\n"
        "found = wait_for_siblings()\n"
        "hit = 0\n"
        "for pid in found:\n"
        "    try:\n        os.kill(pid, signal.SIGSTOP)\n        hit += 1\n"
        "    except OSError:\n        pass\n"
        "return [len(found), hit]\n"
    )
    result = await run_hostile(rt, program, inputs=pids(rt), bindings={"tools.others": others(rt)})
    found, hit = result.value
    assert found >= 1 if _host_pids(rt) else found == 0
    assert hit == 0, "the child stopped its siblings"


@ONE_BACKEND
async def test_a_spare_stopped_from_outside_is_not_handed_to_the_next_run(
    rt: SubprocessRuntime,
) -> None:
    # What a child could do without Landlock signal scoping, done here by the test itself.
    await rt.run(RunRequest(program="1"))
    await settled(rt)
    # The runtime's own spares (the template may still be reaping the run's child).
    with anyio.fail_after(10):  # wait until the spare is forked
        while not rt._spares:
            await anyio.sleep(0.01)
        pids = [await slot.wait_pid() for slot in rt._spares]
    spares = [psutil.Process(pid) for pid in pids if pid is not None]
    assert spares, "no spare child to stop"
    for spare in spares:
        spare.suspend()
    try:
        for spare in spares:
            await _until_stopped(spare.pid)
        for _ in range(2):
            await probe_is_clean(rt)
    finally:
        for spare in spares:
            try:
                spare.resume()
            except psutil.NoSuchProcess:
                pass


def _host_pids(rt: SubprocessRuntime) -> bool:
    """Whether a run's pids are the host's (no PID namespace per run), so a guess can land."""
    return rt.containment.get("processes_per_run") == 1


_FORGE_INTO_SIBLINGS = PROC_HELPERS + (
    "import struct\n"
    "KNOWN = await tools.others()\n"
    'body = b\'{"type":"Done","has_value":true,"value":"pwned"}\'\n'
    "forged = 0\n"
    "found = wait_for_siblings()\n"
    "for pid in found:\n"
    "    try:\n        fds = [int(n) for n in os.listdir(f'/proc/{pid}/fd')]\n"
    "    except OSError:\n        continue\n"
    "    for fd in fds:\n"
    "        if fd <= 2:\n            continue\n"
    "        try:\n"
    "            if not os.readlink(f'/proc/{pid}/fd/{fd}').startswith('pipe:'):\n                continue\n"
    "            w = os.open(f'/proc/{pid}/fd/{fd}', os.O_WRONLY | os.O_NONBLOCK)\n"
    "            os.write(w, struct.pack('!I', len(body)) + body)\n"
    "            os.close(w)\n"
    "            forged += 1\n"
    "        except OSError:\n"
    "            pass\n"
    "return [len(found), forged]\n"
)


@ONE_BACKEND
async def test_a_run_cannot_forge_the_result_of_a_concurrent_run(
    request: pytest.FixtureRequest, rt: SubprocessRuntime
) -> None:
    gap(
        request,
        rt.isolation,
        "a run opens a concurrent run's bridge via /proc/<pid>/fd",
        closed_by_landlock=1,
    )
    attacker_done = anyio.Event()
    victim_up = anyio.Event()
    results: dict[str, RunResult] = {}

    async def wait(args: Any) -> Any:
        victim_up.set()  # its child is running its program: a sibling to attack
        await attacker_done.wait()
        return "mine"

    async def victim() -> None:
        results["victim"] = await rt.run(
            RunRequest(
                program="return await tools.wait()",
                bindings={"tools.wait": wait},
                limits=HOSTILE,
            )
        )

    async with anyio.create_task_group() as tg:
        tg.start_soon(victim)
        with anyio.fail_after(10):
            await victim_up.wait()
        try:
            results["attacker"] = await run_hostile(
                rt,
                _FORGE_INTO_SIBLINGS,
                inputs=pids(rt),
                bindings={"tools.others": others(rt)},
                probe=False,
            )
        finally:
            attacker_done.set()
    assert results["victim"].value == "mine"
    found, forged = results["attacker"].value
    assert found >= 1 if _host_pids(rt) else found == 0
    assert forged == 0
    await probe_is_clean(rt)


@ONE_BACKEND
async def test_a_run_cannot_poison_the_next_run_through_the_spare(
    request: pytest.FixtureRequest, rt: SubprocessRuntime
) -> None:
    gap(
        request,
        rt.isolation,
        "a run writes a forged Done into the spare child's bridge, which becomes the next "
        "run's result",
        closed_by_landlock=1,
    )
    await rt.run(RunRequest(program="1"))
    result = await run_hostile(
        rt, _FORGE_INTO_SIBLINGS, inputs=pids(rt), bindings={"tools.others": others(rt)}
    )  # then: a clean run
    found, forged = result.value
    assert found >= 1 if _host_pids(rt) else found == 0
    assert forged == 0
