"""Hostile programs against stdin, exits and the file system."""

from __future__ import annotations

import os
import secrets
import tempfile

import pytest

from host.sandbox import SubprocessRuntime
from tests.host.sandbox.hostile import (
    ONE_BACKEND,
    expect,
    gap,
    run_hostile,
)

pytestmark = pytest.mark.anyio


# ---- stdin, exits, crashes ------------------------------------------------------------------


@ONE_BACKEND
async def test_reading_stdin_gets_end_of_file(rt: SubprocessRuntime) -> None:
    program = "import sys, os\nreturn [sys.stdin.read(), os.read(0, 10).decode()]"
    result = await run_hostile(rt, program)
    assert result.value == ["", ""]
    result = await run_hostile(rt, "input()")
    expect(result, "exception")
    assert result.error is not None and result.error.exception_type == "EOFError"


@ONE_BACKEND
@pytest.mark.parametrize(
    ("program", "status"),
    [
        pytest.param("import os\nos._exit(0)", 0, id="exit-0"),
        pytest.param("import os\nos._exit(3)", 3, id="exit-3"),
        pytest.param("import ctypes\nctypes.memset(0, 1, 1)", -11, id="segfault"),
        pytest.param("import os\nos.abort()", -6, id="abort"),
    ],
)
async def test_exits_and_crashes_are_deaths_with_their_status(
    rt: SubprocessRuntime, program: str, status: int
) -> None:
    result = await run_hostile(rt, program)
    expect(result, "died")
    assert result.error is not None and result.error.exit_status == status


# ---- the filesystem ------------------------------------------------------------------------


@ONE_BACKEND
async def test_writing_outside_the_private_directory_fails(
    request: pytest.FixtureRequest, rt: SubprocessRuntime
) -> None:
    gap(
        request,
        rt.isolation,
        "no Landlock / mount namespace; the child writes anywhere root can",
        closed_by_landlock=1,
        base="missing isolation at the process level",
    )
    path = os.path.join(tempfile.gettempdir(), f"dsh-adv-{secrets.token_hex(6)}")
    program = (
        "try:\n    open(path, 'w').write('escaped')\n    return 'written'\n"
        "except OSError as e:\n    return e.errno\n"
    )
    try:
        result = await run_hostile(rt, program, inputs={"path": path})
        assert result.value != "written"
        assert not os.path.exists(path)
    finally:
        if os.path.exists(path):
            os.remove(path)


@ONE_BACKEND
async def test_a_workdir_swapped_for_a_symlink_is_removed_without_following_it(
    rt: SubprocessRuntime,
) -> None:
    target = tempfile.mkdtemp(prefix="dsh-adv-target-")
    canary = os.path.join(target, "canary")
    open(canary, "w").close()
    program = (
        "import os\n"
        "wd = os.getcwd()\n"
        "os.chdir('/')\n"
        "try:\n"
        "    os.rmdir(wd)\n"
        "    os.symlink(target, wd)\n"
        "except OSError:\n"
        "    return 'refused'\n"
        "return 'swapped'\n"
    )
    try:
        # refused (Landlock, a mount) or done: either way the host must not follow the link
        result = await run_hostile(rt, program, inputs={"target": target})
        assert result.value in ("swapped", "refused")
        assert os.path.exists(canary)
    finally:
        os.remove(canary)
        os.rmdir(target)


@ONE_BACKEND
async def test_removing_its_own_workdir_settles_cleanly(rt: SubprocessRuntime) -> None:
    program = (
        "import os\nopen('f', 'w').close()\nwd = os.getcwd()\nos.chdir('/')\n"
        "os.remove(os.path.join(wd, 'f'))\n"
        "try:\n    os.rmdir(wd)\nexcept OSError:\n    return 'refused'\nreturn 'removed'"
    )
    result = await run_hostile(rt, program)
    assert result.value in ("removed", "refused")


@ONE_BACKEND
async def test_a_deep_tree_in_the_workdir_is_removed(rt: SubprocessRuntime) -> None:
    program = (
        "import os\n"
        "for i in range(300):\n    os.mkdir('d')\n    os.chdir('d')\n    open('f', 'w').write('x')\n"
        "os.mkfifo('fifo')\n"
        "return 1\n"
    )
    result = await run_hostile(rt, program)
    assert result.value == 1
