"""Hostile programs after the host's secrets: environment, memory, fd tables, ptrace."""

from __future__ import annotations

import os
import secrets

import pytest

from host.sandbox import SubprocessRuntime
from tests.host.sandbox.hostile import (
    ISOLATIONS,
    ONE_BACKEND,
    PROC_HELPERS,
    gap,
    pids,
    run_hostile,
    run_in_separate_host,
)

pytestmark = pytest.mark.anyio


# ---- environment theft ---------------------------------------------------------------------


@ONE_BACKEND
async def test_os_environ_is_empty_and_holds_no_host_secret(rt: SubprocessRuntime) -> None:
    secret = secrets.token_hex(8)
    os.environ["DSH_ADV_SECRET"] = secret
    try:
        result = await run_hostile(rt, "import os\nreturn dict(os.environ)")
    finally:
        del os.environ["DSH_ADV_SECRET"]
    assert result.value == {}


@ONE_BACKEND
async def test_proc_self_environ_is_empty(rt: SubprocessRuntime) -> None:
    # No variable: the template was started with PYTHONHASHSEED alone, and zeroes that area
    # (making it empty needs CAP_SYS_RESOURCE, which a container's root may not have).
    program = (
        "import os\nreturn [open('/proc/self/environ', 'rb').read().decode(), dict(os.environ)]"
    )
    result = await run_hostile(rt, program)
    environ, variables = result.value
    assert environ.strip("\0") == "" and variables == {}, result.value


@ONE_BACKEND
async def test_the_template_environ_is_empty_or_unreachable(rt: SubprocessRuntime) -> None:
    program = PROC_HELPERS + (
        "try:\n    return open(f'/proc/{TEMPLATE}/environ', 'rb').read().decode()\n"
        "except OSError:\n    return 'unreachable'\n"
    )
    result = await run_hostile(rt, program, inputs=pids(rt))
    assert result.value in ("", "unreachable")


_READ_HOST_ENVIRON = PROC_HELPERS + (
    "try:\n"
    "    data = open(f'/proc/{HOST}/environ', 'rb').read()\n"
    "except OSError as e:\n"
    "    return ['refused', e.errno]\n"
    "return ['read', data.decode(errors='replace')]\n"
)


@pytest.mark.parametrize("isolation", ISOLATIONS)
def test_the_host_environ_is_not_readable_from_the_child(
    request: pytest.FixtureRequest, isolation: str
) -> None:
    gap(
        request,
        isolation,
        "/proc/<host>/environ is readable (Landlock does not stop it)",
        closed_by_uid=True,
    )
    secret = secrets.token_hex(8)
    host = run_in_separate_host(_READ_HOST_ENVIRON, isolation, env={"DSH_ADV_SECRET": secret})
    assert host.survived
    first = host.get("first")
    assert secret not in str(first)
    assert first["value"][0] == "refused"


@ONE_BACKEND
async def test_the_host_memory_is_not_readable_from_the_child(
    request: pytest.FixtureRequest, rt: SubprocessRuntime
) -> None:
    gap(request, rt.isolation, "/proc/<host>/mem is readable", closed_by_landlock=1)
    program = PROC_HELPERS + (
        "try:\n"
        "    for line in open(f'/proc/{HOST}/maps'):\n"
        "        addr, perms = line.split()[:2]\n"
        "        if perms.startswith('r'):\n"
        "            with open(f'/proc/{HOST}/mem', 'rb') as mem:\n"
        "                mem.seek(int(addr.split('-')[0], 16))\n"
        "                return ['read', len(mem.read(64))]\n"
        "except OSError as e:\n"
        "    return ['refused', e.errno]\n"
    )
    result = await run_hostile(rt, program, inputs=pids(rt))
    assert result.value[0] == "refused"


@ONE_BACKEND
async def test_the_host_fd_table_is_not_reachable(
    request: pytest.FixtureRequest, rt: SubprocessRuntime
) -> None:
    gap(
        request,
        rt.isolation,
        "the host's fd table is listable (Landlock does not stop it)",
        closed_by_uid=True,
    )
    program = PROC_HELPERS + (
        "try:\n    return ['listed', len(os.listdir(f'/proc/{HOST}/fd'))]\n"
        "except OSError as e:\n    return ['refused', e.errno]\n"
    )
    result = await run_hostile(rt, program, inputs=pids(rt))
    assert result.value[0] == "refused"


# ---- ptrace ------------------------------------------------------------------------------

_SEIZE = (
    "import ctypes\n"
    "libc = ctypes.CDLL(None, use_errno=True)\n"
    "libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]\n"
    "PTRACE_SEIZE = 0x4206\n"
    "rc = libc.ptrace(PTRACE_SEIZE, TARGET, None, None)\n"
    "return [rc, ctypes.get_errno()]\n"
)


@ONE_BACKEND
async def test_ptrace_of_the_template_is_refused(
    request: pytest.FixtureRequest, rt: SubprocessRuntime
) -> None:
    gap(request, rt.isolation, "ptrace of the template succeeds", closed_by_landlock=1)
    result = await run_hostile(rt, PROC_HELPERS + "TARGET = TEMPLATE\n" + _SEIZE, inputs=pids(rt))
    assert result.value is not None and result.value[0] == -1


@pytest.mark.parametrize("isolation", ISOLATIONS)
def test_ptrace_of_the_host_is_refused(request: pytest.FixtureRequest, isolation: str) -> None:
    gap(request, isolation, "ptrace of the host succeeds", closed_by_landlock=1)
    host = run_in_separate_host(PROC_HELPERS + "TARGET = HOST\n" + _SEIZE, isolation)
    assert host.survived
    assert host.get("first")["value"][0] == -1
