"""The runtime under the event loops users bring: plain asyncio.run, uvloop, a running loop."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import textwrap
from typing import Any

import psutil
import pytest

from host.sandbox import SubprocessRuntime
from runtime import Limits, RunRequest
from tests.host.sandbox.hostile import REPO

_README_EXAMPLE = textwrap.dedent(
    """\
    import asyncio
    from host.sandbox import SubprocessRuntime
    from runtime import Limits, RunRequest

    async def add(args):              # a binding: JSON arguments in, JSON out
        return args["a"] + args["b"]

    async def main():
        async with SubprocessRuntime() as rt:
            result = await rt.run(RunRequest(
                program="print('adding')\\nreturn await tools.add(a=2, b=3)",
                bindings={"tools.add": add},          # dotted: attribute `add` of global `tools`
                inputs={"limit": 10},                 # JSON globals
                limits=Limits(compute_ms=5_000),      # defaults: see below
                on_log=print,                         # each log line as the child writes it
            ))
        print(result.value, result.logs, result.error)   # 5 ['adding'] None

    asyncio.run(main())
    """
)


def test_the_readme_example_works_under_plain_asyncio_run() -> None:
    done = subprocess.run(
        [sys.executable, "-c", _README_EXAMPLE],
        capture_output=True,
        timeout=60,
        cwd=REPO,
        env={"PATH": os.environ.get("PATH", ""), "PYTHONPATH": REPO},
        check=False,
    )
    assert done.returncode == 0, done.stderr.decode()
    assert done.stdout.decode().splitlines() == ["adding", "5 ['adding'] None"]
    assert b"Traceback" not in done.stderr


async def _add(args: Any) -> Any:
    await asyncio.sleep(0.01)
    return args["a"] + args["b"]


async def _scenario() -> list[Any]:
    """Bindings, gather, abort, cancellation and aclose on whatever loop runs this."""
    out: list[Any] = []
    async with SubprocessRuntime() as rt:
        result = await rt.run(
            RunRequest(
                program="import asyncio\n"
                "return await asyncio.gather(*(tools.add(a=i, b=1) for i in range(5)))",
                bindings={"tools.add": _add},
            )
        )
        out.append(result.value)
        abort = asyncio.Event()
        task = asyncio.ensure_future(
            rt.run(RunRequest(program="import time\ntime.sleep(30)", abort=abort))
        )
        await asyncio.sleep(0.2)
        abort.set()
        out.append((await task).error.kind)  # type: ignore[union-attr]
        task = asyncio.ensure_future(
            rt.run(RunRequest(program="import time\ntime.sleep(30)", limits=Limits()))
        )
        await asyncio.sleep(0.2)
        task.cancel()
        try:
            cancelled = await task
            out.append(cancelled.error.kind if cancelled.error else None)
        except asyncio.CancelledError:
            out.append("cancelled")
        result = await rt.run(RunRequest(program="while True: pass", limits=Limits(compute_ms=200)))
        out.append(result.error.budget if result.error else None)
    out.append(psutil.Process().children(recursive=True))
    return out


_EXPECTED = [[1, 2, 3, 4, 5], "aborted", "aborted", "compute", []]


def test_a_scenario_under_plain_asyncio_run() -> None:
    assert asyncio.run(_scenario()) == _EXPECTED


def test_a_scenario_under_uvloop() -> None:
    uvloop = pytest.importorskip("uvloop")
    assert uvloop.run(_scenario()) == _EXPECTED


def test_a_scenario_inside_a_loop_that_is_already_running() -> None:
    # Jupyter runs a cell's top-level await as a task of a loop that was running already.
    async def cell() -> list[Any]:
        return await asyncio.ensure_future(_scenario())

    loop = asyncio.new_event_loop()
    try:
        assert loop.run_until_complete(cell()) == _EXPECTED
    finally:
        loop.close()
