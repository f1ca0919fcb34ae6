"""Per-run cgroups: finding the hierarchies, and what runs get from them (real cgroups)."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from pathlib import Path

import psutil
import pytest

from host.sandbox import SubprocessRuntime
from host.sandbox._cgroup import (
    MEMORY_HEADROOM,
    CgroupSet,
    Hierarchy,
    parse_hierarchies,
    runtime_prefix,
)
from runtime import Limits, RunRequest
from tests.host.sandbox.conftest import cgroups_here, our_cgroups

HYBRID_MOUNTINFO = """\
31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
39 31 0:36 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
"""
HYBRID_CGROUP = """\
8:pids:/
4:memory:/jobs/abc
1:cpu:/
0::/
"""


def test_a_hybrid_host_gives_unified_pids_memory_and_cpu() -> None:
    assert parse_hierarchies(HYBRID_MOUNTINFO, HYBRID_CGROUP) == [
        Hierarchy("unified", "/sys/fs/cgroup/unified"),
        Hierarchy("pids", "/sys/fs/cgroup/pids"),
        Hierarchy("memory", "/sys/fs/cgroup/memory/jobs/abc"),
        Hierarchy("cpu", "/sys/fs/cgroup/cpu"),
    ]


def test_controllers_mounted_together_are_one_hierarchy_of_the_first_kind() -> None:
    # a memory cap must not be lost to a cpu controller sharing its mount
    mountinfo = "35 31 0:32 / /sys/fs/cgroup/cpu,memory rw - cgroup cgroup rw,cpu,memory\n"
    assert parse_hierarchies(mountinfo, "4:cpu,memory:/job\n") == [
        Hierarchy("memory", "/sys/fs/cgroup/cpu,memory/job")
    ]


def test_a_shared_cpu_cpuacct_mount_gives_cpu() -> None:
    mountinfo = "32 31 0:29 / /sys/fs/cgroup/cpu,cpuacct rw - cgroup cgroup rw,cpu,cpuacct\n"
    assert parse_hierarchies(mountinfo, "2:cpu,cpuacct:/job\n") == [
        Hierarchy("cpu", "/sys/fs/cgroup/cpu,cpuacct/job")
    ]


def test_a_pure_v2_host_gives_its_own_cgroup() -> None:
    mountinfo = "30 23 0:26 / /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw,nsdelegate\n"
    cgroup = "0::/user.slice/user-1000.slice/session-3.scope\n"
    assert parse_hierarchies(mountinfo, cgroup) == [
        Hierarchy("unified", "/sys/fs/cgroup/user.slice/user-1000.slice/session-3.scope")
    ]


def test_a_mount_of_part_of_a_hierarchy_is_mapped_or_skipped() -> None:
    # A container sees only its own subtree, mounted at /sys/fs/cgroup.
    mountinfo = "30 23 0:26 /docker/abc /sys/fs/cgroup ro - cgroup2 cgroup2 rw\n"
    assert parse_hierarchies(mountinfo, "0::/docker/abc/job\n") == [
        Hierarchy("unified", "/sys/fs/cgroup/job")
    ]
    assert parse_hierarchies(mountinfo, "0::/elsewhere\n") == []


def test_no_cgroup_mounts_give_nothing() -> None:
    assert parse_hierarchies("22 1 0:5 / /proc rw - proc proc rw\n", "0::/\n") == []
    assert parse_hierarchies("garbage\n\n", "also: garbage\n") == []


def test_a_hierarchy_a_process_cannot_join_is_refused(tmp_path: Path) -> None:
    # a plain directory: a "run cgroup" can be made, but it has no cgroup.procs to join
    problem = CgroupSet({"unified": str(tmp_path)}, 64)._probe()
    assert problem.startswith("cannot make a run cgroup"), problem
    assert os.listdir(tmp_path) == []


WHY_NOT = cgroups_here()[1]
needs_cgroups = pytest.mark.skipif(bool(WHY_NOT), reason=f"no cgroups here: {WHY_NOT}")
pytestmark = pytest.mark.anyio


@pytest.fixture
async def crt(workdir_root: str, isolation: str) -> AsyncIterator[SubprocessRuntime]:
    """A runtime with a small process cap; nothing of it may be left afterwards."""
    async with SubprocessRuntime(
        workdir_root=workdir_root, isolation=isolation, max_processes=24
    ) as runtime:
        yield runtime
    assert psutil.Process().children(recursive=True) == []
    assert our_cgroups() == []


@needs_cgroups
async def test_a_run_is_in_a_cgroup_of_its_own(crt: SubprocessRuntime, isolation: str) -> None:
    assert crt.cgroups == cgroups_here()[0]  # what the host's hierarchies give, all of it
    assert crt.why_not_cgroups == ""
    program = "return open('/proc/self/cgroup').read().splitlines()"
    first = await crt.run(RunRequest(program=program))
    lines = first.value
    assert any(f"/{runtime_prefix()}" in line and "/run-" in line for line in lines), lines


@needs_cgroups
async def test_busy_processes_of_a_run_weigh_as_one_group_on_the_cpu(
    crt: SubprocessRuntime, isolation: str
) -> None:
    # Without a cpu group of its own, a run's hundreds of busy processes each weigh as much
    # as the host's watchdog thread, which then waits its turn behind all of them.
    if not _host_cpu_cgroup():
        pytest.skip("no v1 cpu hierarchy on this host")
    program = (
        "return [l for l in open('/proc/self/cgroup').read().splitlines()"
        " if l.split(':')[1].split(',').count('cpu')]"
    )
    lines = (await crt.run(RunRequest(program=program))).value
    assert len(lines) == 1, lines
    path = lines[0].split(":", 2)[2]
    assert f"/{runtime_prefix()}" in path and "/run-" in path, lines
    assert path != _host_cpu_cgroup()


def _host_cpu_cgroup() -> str:
    """This process's cgroup in a v1 cpu hierarchy ("" without one), read independently of
    the code under test."""
    with open("/proc/self/mountinfo") as m:
        mounted = any(
            " - cgroup " in line and "cpu" in line.rsplit(" ", 1)[-1].strip().split(",")
            for line in m
        )
    with open("/proc/self/cgroup") as c:
        for line in c:
            if mounted and "cpu" in line.split(":")[1].split(","):
                return line.rstrip("\n").split(":", 2)[2] or "/"
    return ""


@needs_cgroups
def test_a_reused_cgroup_takes_a_higher_or_lower_memory_cap() -> None:
    made, _ = CgroupSet.create(64)
    assert made is not None
    try:
        cgroup = made.new_run()
        for heap_mb in (512, 64, 1024, 32):
            cgroup.limit_memory(heap_mb << 20)
            expected = (heap_mb << 20) + MEMORY_HEADROOM
            for name in ("memory.limit_in_bytes", "memory.memsw.limit_in_bytes", "memory.max"):
                for path in cgroup.paths.values():
                    if os.path.exists(f"{path}/{name}"):
                        with open(f"{path}/{name}") as f:
                            assert int(f.read()) == expected, name
        made.release(cgroup)
    finally:
        made.close()


@needs_cgroups
async def test_processes_and_threads_are_capped(crt: SubprocessRuntime) -> None:
    program = (
        "import os, signal\n"
        "pids = []\n"
        "try:\n"
        "    for _ in range(200):\n"
        "        pid = os.fork()\n"
        "        if pid == 0:\n"
        "            signal.pause()\n"
        "        pids.append(pid)\n"
        "except OSError as e:\n"
        "    return [len(pids), e.errno]\n"
        "return [len(pids), 0]\n"
    )
    result = await crt.run(RunRequest(program=program))
    forked, errno = result.value
    assert errno == 11  # EAGAIN: the pids cap, not a crash
    assert 10 <= forked < 24


@needs_cgroups
async def test_files_in_the_working_directory_count_towards_the_memory_cap(
    crt: SubprocessRuntime,
) -> None:
    program = (
        "block = b'x' * (1 << 20)\n"
        "with open('big', 'wb') as f:\n"
        "    for _ in range(256):\n"
        "        f.write(block)\n"
        "return 'written'\n"
    )
    result = await crt.run(RunRequest(program=program, limits=Limits(max_heap_mb=32)))
    assert result.value != "written"
    assert result.error is not None and result.error.kind == "memory", result.error
    after = await crt.run(RunRequest(program="return 1"))
    assert after.value == 1  # the cgroup's next child starts clean


@needs_cgroups
async def test_compute_counts_children_that_exited_unwaited(crt: SubprocessRuntime) -> None:
    program = (
        "import os, time\n"
        "pid = os.fork()\n"
        "if pid == 0:\n"
        "    end = time.process_time() + 0.3\n"
        "    while time.process_time() < end:\n"
        "        pass\n"
        "    os._exit(0)\n"
        # until the child has exited (a zombie: nobody waits for it), however loaded the host
        "while open(f'/proc/{pid}/stat').read().rsplit(')', 1)[1].split()[0] != 'Z':\n"
        "    time.sleep(0.01)\n"
        "return 1\n"
    )
    result = await crt.run(RunRequest(program=program))
    assert result.value == 1
    assert result.stats is not None and result.stats.compute_ms >= 250


async def test_cgroups_can_be_turned_off(workdir_root: str) -> None:
    async with SubprocessRuntime(workdir_root=workdir_root, use_cgroups=False) as rt:
        assert rt.cgroups == ()
        assert rt.why_not_cgroups == "use_cgroups=False"
        result = await rt.run(RunRequest(program="return open('/proc/self/cgroup').read()"))
        assert "dsh-code-" not in result.value
    assert our_cgroups() == []


@needs_cgroups
async def test_cgroups_of_a_runtime_whose_process_died_are_removed(workdir_root: str) -> None:
    with open("/proc/self/mountinfo") as m, open("/proc/self/cgroup") as c:
        own = parse_hierarchies(m.read(), c.read())[0].own
    dead = psutil.Popen(["true"])
    dead.wait()
    stale = os.path.join(own, f"{runtime_prefix(dead.pid)}1")
    # a runtime in another PID namespace: its pid means nothing here, so it is left alone
    foreign = os.path.join(own, f"dsh-code-1-{dead.pid}-1")
    os.makedirs(os.path.join(stale, "run-2"))
    os.makedirs(foreign)
    try:
        async with SubprocessRuntime(workdir_root=workdir_root):
            assert not os.path.exists(stale)
            assert os.path.exists(foreign)
    finally:
        os.rmdir(foreign)


def test_max_processes_must_leave_room_for_a_child() -> None:
    with pytest.raises(ValueError, match="max_processes"):
        SubprocessRuntime(max_processes=2)
