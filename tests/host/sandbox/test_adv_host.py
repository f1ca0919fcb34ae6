"""Hostile programs against the host's own work: compiling, monkeypatching."""

from __future__ import annotations

import time
from typing import Any

import anyio
import pytest

from host.sandbox import SubprocessRuntime
from runtime import Limits, RunRequest
from tests.host.sandbox.hostile import (
    ONE_BACKEND,
    echo,
    expect,
    probe_is_clean,
    run_hostile,
)

pytestmark = pytest.mark.anyio


# ---- the host's own work: compiling, monkeypatching -------------------------------------------


@ONE_BACKEND
async def test_a_huge_program_does_not_stall_the_host(rt: SubprocessRuntime) -> None:
    await rt.run(RunRequest(program="1"))
    stall = 0.0

    async def ticker() -> None:
        nonlocal stall
        last = time.monotonic()
        while True:
            await anyio.sleep(0.01)
            now = time.monotonic()
            stall = max(stall, now - last)
            last = now

    async with anyio.create_task_group() as tg:
        tg.start_soon(ticker)
        await anyio.sleep(0.05)
        await run_hostile(rt, "x = 1\n" * 30_000 + "return x", probe=False)
        tg.cancel_scope.cancel()
    await probe_is_clean(rt)
    assert stall < 1.0, f"the host's event loop stalled for {stall:.2f} s"


@ONE_BACKEND
@pytest.mark.parametrize(
    ("program", "value"),
    [
        pytest.param(
            "import asyncio\n"
            "asyncio.sleep = None\nasyncio.get_running_loop = None\nasyncio.Future = None\n"
            "asyncio.gather = None\nasyncio.ensure_future = None\n"
            "return 5",
            5,
            id="asyncio-patched",
        ),
        pytest.param(
            "import builtins\n"
            "builtins.print = None\nbuiltins.isinstance = None\nbuiltins.type = None\n"
            "builtins.__import__ = None\nbuiltins.len = lambda x: 0\n"
            "return [1, 2, 3]",
            [1, 2, 3],
            id="builtins-patched",
        ),
        pytest.param(
            "import sys, io\n"
            "class Stuck(io.TextIOBase):\n"
            "    def write(self, s):\n        return len(s)\n"
            "    def flush(self):\n        import time; time.sleep(60)\n"
            "sys.stdout = sys.stderr = Stuck()\n"
            "return 6",
            6,
            id="stdout-flush-hangs",
        ),
        pytest.param(
            "import asyncio\nasyncio.get_running_loop().stop()\nawait asyncio.sleep(0)\nreturn 7",
            "exception: RuntimeError: Event loop stopped before Future completed.",
            id="loop-stopped",
        ),
        pytest.param(
            "import asyncio\nloop = asyncio.get_running_loop()\n"
            "for fd in range(3, 64):\n    loop.remove_reader(fd)\n"
            "return await tools.echo(v=1)",
            {"v": 1},  # the bridge watches its pipe from the first call on: after the removal
            id="bridge-reader-removed",
        ),
    ],
)
async def test_monkeypatching_asyncio_and_builtins_stays_inside_the_child(
    rt: SubprocessRuntime, program: str, value: Any
) -> None:
    limits = Limits(compute_ms=500, max_wall_ms=800)
    result = await run_hostile(rt, program, limits=limits, bindings={"tools.echo": echo})
    if isinstance(value, str) and value.startswith("exception: "):
        # the program broke its own event loop: its own exception, in its own words
        expect(result, "exception")
        assert result.error is not None
        assert result.error.message.splitlines()[-1] == value.removeprefix("exception: ")
    else:
        assert result.error is None, result.error
        assert result.value == value
