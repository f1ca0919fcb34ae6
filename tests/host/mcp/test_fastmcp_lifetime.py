"""DshSandboxProvider's lifetime: providers never closed leave no process once the loop ends."""

from __future__ import annotations

import asyncio
import gc
import os
import warnings
from typing import Any

import psutil
import trio
from fastmcp import Client, FastMCP
from fastmcp.experimental.transforms.code_mode import CodeMode

from host.mcp import DshSandboxProvider
from host.sandbox._options import default_workdir_root
from tests.host.sandbox.conftest import our_cgroups


def _children() -> set[int]:
    return {p.pid for p in psutil.Process().children(recursive=True)}


def test_providers_never_closed_leave_no_process_when_the_loop_ends() -> None:
    before = _children()

    async def main() -> list[Any]:
        out = []
        for i in range(5):  # as FastMCP does: providers made, used, never closed
            server: FastMCP[Any] = FastMCP(
                f"s{i}", transforms=[CodeMode(sandbox_provider=DshSandboxProvider())]
            )
            async with Client(server) as client:
                result = await client.call_tool("execute", {"code": f"return {i}"})
                out.append(result.content[0].text)
        assert _children() - before  # the loop's shared runtime is running
        return out

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert asyncio.run(main()) == ["0", "1", "2", "3", "4"]
        gc.collect()
    assert not _children() - before
    assert our_cgroups() == []


def test_the_shared_runtime_closes_when_a_trio_run_ends() -> None:
    before = _children()

    async def main() -> Any:
        return await DshSandboxProvider().run("return 6 * 7")

    assert trio.run(main) == 42
    gc.collect()
    assert not _children() - before
    assert our_cgroups() == []


def _fds() -> set[str]:
    return set(os.listdir("/proc/self/fd"))


def _workdirs() -> set[str]:
    ours = f"-{os.getpid()}-"  # dsh-run-<pid namespace>-<pid>-...: this process's runtimes
    return {p for p in os.listdir(default_workdir_root()) if p.startswith("dsh-run-") and ours in p}


def test_a_loop_that_ends_right_after_a_run_leaves_nothing() -> None:
    before, fds, workdirs = _children(), _fds(), _workdirs()

    async def main() -> Any:
        return await DshSandboxProvider().run("return 1")  # the run's release is still going

    assert asyncio.run(main()) == 1  # asyncio.run cancels it, then closes the shared runtime
    gc.collect()
    assert not _children() - before
    assert our_cgroups() == []
    assert _fds() - fds == set()  # the run's pipes and pidfd, the template's socket
    assert _workdirs() - workdirs == set()
