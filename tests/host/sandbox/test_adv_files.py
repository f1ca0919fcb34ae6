"""Hostile programs against stdin, exits and the file system."""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
import tempfile
import time

import anyio
import pytest

from host.sandbox import SubprocessRuntime
from runtime import RunRequest
from tests.host.sandbox.hostile import (
    ONE_BACKEND,
    REPO,
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


@ONE_BACKEND
async def test_a_tree_deeper_than_the_recursion_limit_is_removed(rt: SubprocessRuntime) -> None:
    program = (
        "import os\n"
        "for i in range(1500):\n    os.mkdir('d')\n    os.chdir('d')\n"
        "open('f', 'w').write('x')\n"
        "return 1\n"
    )
    result = await run_hostile(rt, program)
    assert result.value == 1  # and the rt fixture finds the workdir root empty


@ONE_BACKEND
async def test_an_immutable_file_in_the_workdir_is_removed(rt: SubprocessRuntime) -> None:
    program = (
        "import ctypes, fcntl, os\n"
        "open('locked', 'w').write('x')\n"
        "fd = os.open('locked', os.O_RDONLY)\n"
        "try:\n"
        "    fcntl.ioctl(fd, 0x40086602, ctypes.c_long(0x10 | 0x20))\n"
        "    flagged = True\n"
        "except OSError:\n"
        "    flagged = False\n"
        "return flagged\n"
    )
    result = await run_hostile(rt, program)
    assert result.error is None, result.error  # flagged or refused; the fixture checks removal


@pytest.mark.parametrize("isolation", ["namespaces", "process"])
def test_a_killed_host_leaves_nothing_the_next_runtime_does_not_sweep(
    isolation: str, workdir_root: str
) -> None:
    # A host killed mid-run (SIGKILL: no clean-up at all) leaves its run directory behind;
    # the next runtime on the same root removes directories of runtimes that are gone.
    script = (
        "import sys, anyio\n"
        f"sys.path.insert(0, {REPO!r})\n"
        "from host.sandbox import SubprocessRuntime\n"
        "from runtime import RunRequest\n"
        "async def main():\n"
        f"    async with SubprocessRuntime(isolation={isolation!r}, workdir_root={workdir_root!r}) as rt:\n"
        "        print('ready', flush=True)\n"
        "        await rt.run(RunRequest(program='import time\\ntime.sleep(60)'))\n"
        "anyio.run(main)\n"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline() == b"ready\n"
        deadline = time.monotonic() + 10
        while not os.listdir(workdir_root) and time.monotonic() < deadline:
            time.sleep(0.01)
        time.sleep(0.2)
    finally:
        proc.kill()
        proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()
    assert os.listdir(workdir_root), "the killed host left no directory: nothing to sweep"

    async def next_runtime() -> None:
        async with SubprocessRuntime(isolation=isolation, workdir_root=workdir_root) as rt:
            await rt.run(RunRequest(program="1"))

    deadline = time.monotonic() + 10  # the killed host's template exits on its own
    anyio.run(next_runtime)
    while os.listdir(workdir_root) and time.monotonic() < deadline:
        time.sleep(0.05)
        anyio.run(next_runtime)
    assert os.listdir(workdir_root) == []
