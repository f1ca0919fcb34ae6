"""Hostile programs against the memory caps and rlimits."""

from __future__ import annotations

import pytest

from host.sandbox import SubprocessRuntime
from runtime import Limits
from tests.host.sandbox.hostile import (
    ONE_BACKEND,
    expect,
    gap,
    run_hostile,
)

pytestmark = pytest.mark.anyio


# ---- memory ------------------------------------------------------------------------------

_MEM = Limits(compute_ms=3_000, max_wall_ms=5_000, max_heap_mb=64)


@ONE_BACKEND
async def test_list_growth_hits_the_heap_cap(rt: SubprocessRuntime) -> None:
    program = "xs = []\nwhile True:\n    xs.append(' ' * (1 << 20))"
    result = await run_hostile(rt, program, limits=_MEM)
    expect(result, "memory")


@ONE_BACKEND
async def test_a_private_mmap_beyond_the_heap_cap_is_refused(rt: SubprocessRuntime) -> None:
    program = (
        "import mmap\n"
        "m = mmap.mmap(-1, 256 << 20, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)\n"
        "for i in range(0, len(m), 4096):\n    m[i] = 1\n"
        "return 'touched'\n"
    )
    result = await run_hostile(rt, program, limits=_MEM)
    assert result.error is not None and result.error.kind in ("memory", "exception")
    assert "touched" not in str(result.value)


@ONE_BACKEND
async def test_a_shared_anonymous_mmap_is_held_to_the_heap_cap(
    request: pytest.FixtureRequest, rt: SubprocessRuntime
) -> None:
    gap(
        request,
        rt.isolation,
        "RLIMIT_DATA does not count MAP_SHARED (shmem) pages; a memory cgroup caps them",
        closed_by_cgroups="memory",
        levels=("process", "namespaces"),
        base="missing isolation at every level",
    )
    program = (
        "import mmap\n"
        "m = mmap.mmap(-1, 256 << 20)\n"
        "for i in range(0, len(m), 4096):\n    m[i] = 1\n"
        "return 'touched'\n"
    )
    result = await run_hostile(rt, program, limits=_MEM)
    assert result.value != "touched"
    assert result.error is not None and result.error.kind in ("memory", "exception")


@ONE_BACKEND
async def test_catching_memory_error_keeps_usage_under_the_cap(rt: SubprocessRuntime) -> None:
    program = (
        "xs = []\n"
        "try:\n"
        "    while True:\n        xs.append(bytearray(1 << 20))\n"
        "except MemoryError:\n    pass\n"
        "return len(xs)\n"
    )
    result = await run_hostile(rt, program, limits=_MEM)
    assert result.error is None
    assert 0 < result.value <= 64


@ONE_BACKEND
async def test_retrying_after_memory_error_forever_hits_the_compute_budget(
    rt: SubprocessRuntime,
) -> None:
    program = (
        "xs = []\n"
        "while True:\n"
        "    try:\n        xs.append(bytearray(1 << 20))\n"
        "    except MemoryError:\n        pass\n"
    )
    limits = Limits(compute_ms=500, max_wall_ms=5_000, max_heap_mb=64)
    result = await run_hostile(rt, program, limits=limits)
    expect(result, "budget", "compute")


def _has_cap_sys_resource() -> bool:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("CapEff:"):
                return bool(int(line.split()[1], 16) >> 24 & 1)
    return False


@ONE_BACKEND
async def test_raising_rlimit_data_does_not_lift_the_heap_cap(
    request: pytest.FixtureRequest, rt: SubprocessRuntime
) -> None:
    if _has_cap_sys_resource():  # not on this machine: its bounding set drops the capability
        gap(
            request,
            rt.isolation,
            "the child keeps CAP_SYS_RESOURCE, so it raises its own hard RLIMIT_DATA and the "
            "heap cap no longer binds",
        )
    program = (
        "import resource\n"
        "inf = resource.RLIM_INFINITY\n"
        "try:\n    resource.setrlimit(resource.RLIMIT_DATA, (inf, inf))\n"
        "except (ValueError, OSError):\n    pass\n"
        "xs = [bytearray(1 << 20) for _ in range(256)]\n"
        "return len(xs)\n"
    )
    result = await run_hostile(rt, program, limits=_MEM)
    expect(result, "memory")


@ONE_BACKEND
async def test_raising_rlimit_cpu_does_not_lift_the_compute_budget(rt: SubprocessRuntime) -> None:
    program = (
        "import resource\n"
        "inf = resource.RLIM_INFINITY\n"
        "try:\n    resource.setrlimit(resource.RLIMIT_CPU, (inf, inf))\n"
        "except (ValueError, OSError):\n    pass\n"
        "while True:\n    pass\n"
    )
    result = await run_hostile(rt, program)
    expect(result, "budget", "compute")


@ONE_BACKEND
async def test_raising_rlimit_nofile_and_opening_many_fds_settles_cleanly(
    rt: SubprocessRuntime,
) -> None:
    program = (
        "import resource, os\n"
        "try:\n    resource.setrlimit(resource.RLIMIT_NOFILE, (8192, 8192))\n"
        "except (ValueError, OSError):\n    pass\n"
        "fds = []\n"
        "try:\n"
        "    for _ in range(5000):\n        fds.append(os.open('/dev/null', os.O_RDONLY))\n"
        "except OSError:\n    pass\n"
        "return len(fds)\n"
    )
    result = await run_hostile(rt, program)
    assert result.error is None and isinstance(result.value, int)


@ONE_BACKEND
async def test_exhausting_fds_is_an_exception_at_the_open_files_limit(
    rt: SubprocessRuntime,
) -> None:
    program = "fs = []\nwhile True:\n    fs.append(open('/dev/null'))"
    result = await run_hostile(rt, program)
    expect(result, "exception")
    assert result.error is not None and "Too many open files" in result.error.message
