"""Hostile programs against the output cap and the lossless-JSON rule."""

from __future__ import annotations

import json
import time

import anyio
import pytest

from host.sandbox import SubprocessRuntime
from runtime import Limits, RunRequest, RunResult
from tests.host.sandbox.hostile import (
    ONE_BACKEND,
    PeakRss,
    bridge_helpers,
    expect,
    kind_of,
    loop_stalls,
    run_hostile,
)

pytestmark = pytest.mark.anyio


# ---- output floods --------------------------------------------------------------------------

_CAP = Limits(compute_ms=2_000, max_wall_ms=5_000, max_output_bytes=100_000)


def _log_bytes(result: RunResult) -> int:
    return sum(len(line.encode()) + 1 for line in result.logs)


@ONE_BACKEND
@pytest.mark.parametrize(
    "program",
    [
        pytest.param("print('x' * 10_000_000)\nreturn 1", id="one-10MB-line"),
        pytest.param(
            "import os\nfor _ in range(3_000_000):\n    os.write(1, b'x')\nreturn 1",
            id="tiny-writes",
        ),
        pytest.param("for _ in range(2_000_000):\n    print(1)\nreturn 1", id="million-prints"),
        pytest.param(
            "import sys\nfor _ in range(200_000):\n    sys.stderr.write('e' * 50)\nreturn 1",
            id="stderr-without-newlines",
        ),
        pytest.param(
            "import subprocess\nsubprocess.run(['head', '-c', '5000000', '/dev/zero'])\nreturn 1",
            id="subprocess-flood",
        ),
    ],
)
async def test_floods_stop_at_the_output_cap(rt: SubprocessRuntime, program: str) -> None:
    result = await run_hostile(rt, program, limits=_CAP)
    expect(result, "output_limit")
    assert _log_bytes(result) <= 100_000 + 1


@ONE_BACKEND
async def test_closing_stdout_and_stderr_still_returns_the_result(rt: SubprocessRuntime) -> None:
    program = "import os\nprint('bye', flush=True)\nos.close(1)\nos.close(2)\nreturn 'ok'"
    result = await run_hostile(rt, program)
    assert (result.value, result.logs) == ("ok", ["bye"])


@ONE_BACKEND
async def test_invalid_utf8_and_control_bytes_in_logs_are_replaced(
    rt: SubprocessRuntime,
) -> None:
    program = "import os\nos.write(1, b'a\\xff\\xfe\\x00b\\r\\n')\nreturn 1"
    result = await run_hostile(rt, program)
    assert result.value == 1
    assert result.logs == ["a\ufffd\ufffd\x00b\r"]


# ---- results that are not lossless JSON --------------------------------------------------------

_EVIL = (
    "class Evil:\n"
    "    def __eq__(self, other):\n        raise RuntimeError('eq')\n"
    "    def __hash__(self):\n        raise RuntimeError('hash')\n"
    "    def __repr__(self):\n        raise RuntimeError('repr')\n"
    "    def __len__(self):\n        raise RuntimeError('len')\n"
    "    def __iter__(self):\n        raise RuntimeError('iter')\n"
)


@ONE_BACKEND
@pytest.mark.parametrize(
    "program",
    [
        pytest.param("return float('nan')", id="nan"),
        pytest.param("return {'a': [1, float('-inf')]}", id="inf"),
        pytest.param("x = {}\nx['self'] = x\nreturn x", id="dict-cycle"),
        pytest.param(
            "x = []\nfor _ in range(100_000):\n    x = [x]\nreturn x", id="list-nested-100k"
        ),
        pytest.param(
            "x = {}\nfor _ in range(100_000):\n    x = {'k': x}\nreturn x", id="dict-nested-100k"
        ),
        pytest.param(_EVIL + "return [Evil()]", id="evil-object"),
        pytest.param(
            "class D(dict):\n"
            "    def items(self):\n        raise RuntimeError('items')\n"
            "    def keys(self):\n        raise RuntimeError('keys')\n"
            "    def __iter__(self):\n        raise RuntimeError('iter')\n"
            "return D(a=1)",
            id="evil-dict-subclass",
        ),
        pytest.param(
            "class S(str):\n"
            "    def __str__(self):\n        raise RuntimeError('str')\n"
            "    def __repr__(self):\n        raise RuntimeError('repr')\n"
            "    def __len__(self):\n        raise RuntimeError('len')\n"
            "    def encode(self, *a):\n        raise RuntimeError('encode')\n"
            "return {'k': S('v')}",
            id="evil-str-subclass",
        ),
        pytest.param(
            "class L(list):\n"
            "    def __len__(self):\n        return 10**9\n"
            "    def __getitem__(self, i):\n        raise RuntimeError('getitem')\n"
            "return L([1])",
            id="evil-list-subclass",
        ),
        pytest.param(
            "class I(int):\n"
            "    def __index__(self):\n        raise RuntimeError('index')\n"
            "    def __repr__(self):\n        raise RuntimeError('repr')\n"
            "return I(3)",
            id="evil-int-subclass",
        ),
        pytest.param("return (x for x in [1])", id="generator"),
        pytest.param("import asyncio\nreturn asyncio.sleep(0)", id="coroutine"),
        pytest.param("return {1: 'a'}", id="int-key"),
    ],
)
async def test_results_that_are_not_lossless_json_are_invalid_completion(
    rt: SubprocessRuntime, program: str
) -> None:
    result = await run_hostile(rt, program)
    expect(result, "invalid_completion")


@ONE_BACKEND
async def test_a_dict_key_with_an_evil_repr_is_invalid_completion(rt: SubprocessRuntime) -> None:
    program = (
        "class K:\n"
        "    def __hash__(self):\n        return 1\n"
        "    def __repr__(self):\n        raise RuntimeError('repr')\n"
        "return {K(): 1}\n"
    )
    result = await run_hostile(rt, program)
    expect(result, "invalid_completion")


@ONE_BACKEND
async def test_an_int_too_long_to_print_is_invalid_completion(rt: SubprocessRuntime) -> None:
    result = await run_hostile(rt, "return 10 ** 5000")
    expect(result, "invalid_completion")


@ONE_BACKEND
async def test_an_int_too_long_for_the_host_settles_promptly(rt: SubprocessRuntime) -> None:
    # The child lifts its own digit limit: the lossless-JSON rule still says no (a default
    # interpreter, the host's or the reader's, could not read the value back).
    program = "import sys\nsys.set_int_max_str_digits(0)\nreturn 10 ** 5000"
    start = time.monotonic()
    result = await run_hostile(rt, program)
    expect(result, "invalid_completion")
    assert result.error is not None and "more than 4300 digits" in result.error.message
    assert time.monotonic() - start < 2.0


@ONE_BACKEND
async def test_an_exception_whose_type_name_raises_is_still_an_exception(
    rt: SubprocessRuntime,
) -> None:
    program = (
        "class Meta(type):\n"
        "    @property\n"
        "    def __qualname__(cls):\n        raise RuntimeError('qualname')\n"
        "class E(Exception, metaclass=Meta):\n    pass\n"
        "raise E('boom')\n"
    )
    result = await run_hostile(rt, program)
    expect(result, "exception")


@ONE_BACKEND
async def test_an_exception_whose_str_raises_is_still_an_exception(rt: SubprocessRuntime) -> None:
    program = (
        "class E(Exception):\n"
        "    def __str__(self):\n        raise RuntimeError('str')\n"
        "raise E()\n"
    )
    result = await run_hostile(rt, program)
    expect(result, "exception")
    assert result.error is not None and "<exception str() failed>" in result.error.message


@ONE_BACKEND
async def test_the_exception_type_of_a_program_class_is_its_own_name(
    rt: SubprocessRuntime,
) -> None:
    result = await run_hostile(rt, "class E(Exception):\n    pass\nraise E('x')")
    expect(result, "exception")
    assert result.error is not None and result.error.exception_type == "E"


# ---- floods against the host itself ----------------------------------------------------------


@ONE_BACKEND
async def test_one_huge_line_stalls_neither_budgets_nor_other_runs(rt: SubprocessRuntime) -> None:
    flood = Limits(compute_ms=500, max_wall_ms=3_000, max_output_bytes=64 << 20)
    program = "print('x' * (64 << 20), end='')\nimport time\ntime.sleep(30)"
    trivial: list[float] = []

    async def neighbour() -> None:
        await anyio.sleep(0.5)
        start = time.monotonic()
        result = await rt.run(RunRequest(program="1 + 1", limits=Limits(max_wall_ms=5_000)))
        trivial.append(time.monotonic() - start)
        assert result.value == 2

    cpu = time.process_time()
    start = time.monotonic()
    async with loop_stalls() as stalls, anyio.create_task_group() as tg:
        tg.start_soon(neighbour)
        result = await run_hostile(rt, program, limits=flood, probe=False)
    elapsed = time.monotonic() - start
    assert kind_of(result) in ("budget", "output_limit"), result.error
    # generous sanity bounds (the benchmarks measure the real figures): today a 40 MiB line
    # takes ~11 s of the host's CPU and holds every other run for as long
    assert elapsed < 3.0 + 1.5, f"settled {elapsed:.2f} s after it started"
    assert time.process_time() - cpu < 3.0
    assert stalls.longest < 0.5, f"the host's event loop stalled for {stalls.longest:.2f} s"
    assert trivial and trivial[0] < 1.0, trivial


@ONE_BACKEND
async def test_a_flood_of_tiny_lines_keeps_host_memory_bounded(rt: SubprocessRuntime) -> None:
    limits = Limits(compute_ms=10_000, max_wall_ms=20_000, max_output_bytes=64 << 20)
    program = (
        "import os\nchunk = b'x\\n' * (1 << 20)\nfor _ in range(22):\n    os.write(1, chunk)\n"
    )
    with PeakRss() as rss:
        result = await run_hostile(rt, program, limits=limits, timeout=60)
    expect(result, "output_limit")
    # the output cap, plus what a bounded number of lines costs as Python objects
    assert rss.grown < (64 << 20) + (160 << 20), f"host RSS grew {rss.grown >> 20} MiB"


@ONE_BACKEND
@pytest.mark.parametrize("forged", [False, True], ids=["raised", "forged"])
async def test_a_huge_exception_type_name_is_held_to_the_output_cap(
    rt: SubprocessRuntime, forged: bool
) -> None:
    if forged:
        program = bridge_helpers() + (
            "send({'type': 'Failed', 'kind': 'exception', 'message': 'm', "
            "'exception_type': 'E' * (30 << 20)})\nimport time\ntime.sleep(5)\n"
        )
    else:
        program = (
            "class Meta(type):\n"
            "    def __getattribute__(cls, name):\n"
            "        if name == '__qualname__':\n            return 'E' * (30 << 20)\n"
            "        return super().__getattribute__(name)\n"
            "class E(Exception, metaclass=Meta):\n    pass\n"
            "raise E('boom')\n"
        )
    limits = Limits(compute_ms=5_000, max_wall_ms=10_000, max_output_bytes=1_000, max_heap_mb=512)
    result = await run_hostile(rt, program, limits=limits)
    assert result.error is not None
    size = len(json.dumps(result.to_json()))
    assert size <= 1_000 + 600, f"the failure is {size} bytes of JSON"


@ONE_BACKEND
async def test_a_result_huge_only_as_json_fails_the_output_cap_at_once(
    rt: SubprocessRuntime,
) -> None:
    program = "row = {f'k{i}': 'v' * 100 for i in range(100)}\nreturn [row] * 100_000"
    limits = Limits(compute_ms=10_000, max_wall_ms=20_000, max_output_bytes=1 << 20)
    start = time.monotonic()
    result = await run_hostile(rt, program, limits=limits)
    expect(result, "output_limit")
    assert time.monotonic() - start < 3.0
    assert result.stats is not None and result.stats.compute_ms < 2_000, result.stats
