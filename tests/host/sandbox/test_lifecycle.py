"""The runtime's own life: start, runs in flight, aclose, and what outlives none of them."""

from __future__ import annotations

import os

import anyio
import psutil
import pytest

from host.sandbox import SubprocessRuntime
from runtime import RunRequest, RunResult, RuntimeClosedError
from tests.host.sandbox.conftest import our_cgroups

pytestmark = pytest.mark.anyio


async def test_aclose_while_the_template_starts_waits_for_it(workdir_root: str) -> None:
    rt = SubprocessRuntime(workdir_root=workdir_root)
    results: list[RunResult] = []

    async def runner() -> None:
        results.append(await rt.run(RunRequest(program="return 1")))

    async with anyio.create_task_group() as tg:
        tg.start_soon(runner)
        await anyio.sleep(0.01)  # the run is in, its template still starting (~100 ms)
        await rt.aclose()
        # nothing the runtime started outlives aclose(), not even the template it was starting
        assert psutil.Process().children(recursive=True) == []
        assert our_cgroups() == []
    assert len(results) == 1
    assert results[0].error is not None and results[0].error.kind == "aborted", results[0]
    assert os.listdir(workdir_root) == []
    with pytest.raises(RuntimeClosedError):
        await rt.run(RunRequest(program="1"))


async def test_aclose_before_any_run_leaves_nothing(workdir_root: str) -> None:
    rt = SubprocessRuntime(workdir_root=workdir_root)
    await rt.aclose()
    await rt.aclose()  # idempotent
    assert psutil.Process().children(recursive=True) == []
    with pytest.raises(RuntimeClosedError):
        await rt.run(RunRequest(program="1"))


async def test_preloaded_modules_are_imported_once_for_every_child(workdir_root: str) -> None:
    async with SubprocessRuntime(
        workdir_root=workdir_root, preload=("decimal", "xml.dom.minidom")
    ) as rt:
        assert rt.containment["preload"] == ["decimal", "xml.dom.minidom"]
        assert rt.containment["preload_threads"] == 0
        result = await rt.run(RunRequest(program="import sys\n'xml.dom.minidom' in sys.modules"))
        assert result.value is True  # there before the program imported anything
        # each child has its own copy: what one run changes, the next does not see
        await rt.run(RunRequest(program="import decimal\ndecimal.getcontext().prec = 3"))
        again = await rt.run(RunRequest(program="import decimal\ndecimal.getcontext().prec"))
        assert again.value == 28


async def test_a_preload_that_does_not_import_is_a_clear_error(workdir_root: str) -> None:
    from runtime import RuntimeEnvironmentError

    rt = SubprocessRuntime(workdir_root=workdir_root, preload=("no_such_module_here",))
    with pytest.raises(RuntimeEnvironmentError, match="cannot import no_such_module_here"):
        await rt.start()
    await rt.aclose()
    assert psutil.Process().children(recursive=True) == []
    with pytest.raises(ValueError, match="module names"):
        SubprocessRuntime(preload="numpy")
