"""Hostile programs that forge, flood or break the bridge."""

from __future__ import annotations

import time
from typing import Any

import anyio
import psutil
import pytest

from host.sandbox import SubprocessRuntime
from runtime import Limits
from tests.host.sandbox.hostile import (
    ONE_BACKEND,
    PeakRss,
    bridge_helpers,
    echo,
    expect,
    kind_of,
    run_hostile,
)

pytestmark = pytest.mark.anyio


# ---- the bridge ------------------------------------------------------------------------------


@ONE_BACKEND
async def test_unframed_garbage_on_the_bridge_yields_no_value(rt: SubprocessRuntime) -> None:
    program = bridge_helpers() + "os.write(CTL_OUT, os.urandom(4096))\nreturn 1"
    result = await run_hostile(rt, program, limits=Limits(compute_ms=500, max_wall_ms=1_500))
    assert not result.has_value
    assert kind_of(result) in ("died", "budget")


async def test_forged_frames_with_wrong_shapes_are_dropped_and_counted(
    rt: SubprocessRuntime,
) -> None:
    forged = [
        b"garbage",
        b"null",
        b"[]",
        b"[" * 100_000 + b"]" * 100_000,
        b'{"type": "Done", "has_value": "yes", "value": 1}',
        b'{"type": "Done", "has_value": true}',
        b'{"type": "Done", "has_value": true, "value": NaN}',
        b'{"type": "Failed", "kind": "budget", "message": "forged"}',
        b'{"type": "Failed", "kind": "died", "message": "forged"}',
        b'{"type": "Failed", "kind": "aborted", "message": "forged"}',
        b'{"type": "Failed", "kind": "parse", "message": "forged"}',
        b'{"type": "Failed", "kind": "exception", "message": "m", "lineno": "x"}',
        b'{"type": "Failed", "kind": "exception"}',
        b'{"type": "Call", "id": "x", "name": "tools.echo", "args": {}}',
        b'{"type": "Call", "name": "tools.echo", "args": {}}',
        b'{"type": "Reply", "id": 1, "value": 1}',
        b'{"type": "Start"}',
    ]
    program = bridge_helpers() + (
        f"for body in {forged!r}:\n    send(body)\nreturn await tools.echo(v=42)\n"
    )
    result = await run_hostile(rt, program, bindings={"tools.echo": echo})
    assert result.value == {"v": 42}
    assert result.stats is not None
    assert result.stats.dropped_frames == len(forged)
    assert result.stats.calls == 1


async def test_a_forged_done_settles_once_and_later_frames_are_dropped(
    rt: SubprocessRuntime,
) -> None:
    program = bridge_helpers() + (
        "send({'type': 'Done', 'has_value': True, 'value': 7})\n"
        "send({'type': 'Done', 'has_value': True, 'value': 8})\n"
        "send({'type': 'Failed', 'kind': 'exception', 'message': 'late'})\n"
        "return 9\n"
    )
    result = await run_hostile(rt, program)
    assert result.value == 7


@ONE_BACKEND
async def test_a_forged_repr_that_is_not_a_string_is_invalid_completion(
    rt: SubprocessRuntime,
) -> None:
    program = bridge_helpers() + (
        "send({'type': 'Done', 'has_value': True, 'value': [1], 'is_repr': True})\nreturn 9\n"
    )
    result = await run_hostile(rt, program)
    expect(result, "invalid_completion")
    assert not result.value_is_repr and "value_is_repr" not in result.to_json()


async def test_forged_calls_outside_the_bindings_never_reach_a_binding(
    rt: SubprocessRuntime,
) -> None:
    called: list[Any] = []

    async def echo(args: Any) -> Any:
        called.append(args)
        return args

    names = [
        "tools",
        "echo",
        "tools.echo.__globals__",
        "",
        "tools.echo ",
        "TOOLS.ECHO",
        "tools..echo",
    ]
    program = bridge_helpers() + (
        f"for i, name in enumerate({names!r}):\n"
        "    send({'type': 'Call', 'id': 10_000 + i, 'name': name, 'args': {}})\n"
        "import asyncio\nawait asyncio.sleep(0.2)\nreturn 1\n"
    )
    result = await run_hostile(rt, program, bindings={"tools.echo": echo})
    assert result.value == 1
    assert called == []
    assert result.stats is not None and result.stats.calls == len(names)


async def test_a_forged_failure_message_is_held_to_the_output_cap(rt: SubprocessRuntime) -> None:
    program = bridge_helpers() + (
        "send({'type': 'Failed', 'kind': 'exception', 'message': 'x' * 2_000_000})\n"
        "import time\ntime.sleep(5)\n"
    )
    limits = Limits(compute_ms=2_000, max_wall_ms=5_000, max_output_bytes=10_000)
    result = await run_hostile(rt, program, limits=limits)
    assert result.error is not None
    assert len(result.error.message) + len(result.error.traceback or "") <= 10_000


@ONE_BACKEND
async def test_a_forged_call_with_deeply_nested_args_is_dropped(rt: SubprocessRuntime) -> None:
    called: list[Any] = []

    async def echo(args: Any) -> Any:
        called.append(1)
        return args

    program = bridge_helpers() + (
        "n = 200_000\n"
        'send(b\'{"type":"Call","id":5000,"name":"tools.echo","args":\' + b\'[\' * n + b\']\' * n + b\'}\')\n'
        "return 1\n"
    )
    result = await run_hostile(rt, program, bindings={"tools.echo": echo})
    assert result.value == 1
    assert called == []
    assert result.stats is not None and result.stats.dropped_frames == 1


async def test_closing_the_bridge_and_hanging_is_a_death(rt: SubprocessRuntime) -> None:
    program = bridge_helpers() + "os.close(CTL_OUT)\nos.close(CTL_IN)\nimport time\ntime.sleep(60)"
    start = time.monotonic()
    result = await run_hostile(rt, program, limits=Limits(compute_ms=500, max_wall_ms=10_000))
    expect(result, "died")
    assert time.monotonic() - start < 3


@ONE_BACKEND
@pytest.mark.parametrize("style", ["async", "sync"])
async def test_closing_the_reply_pipe_then_calling_settles_at_once(
    rt: SubprocessRuntime, style: str
) -> None:
    call = "await tools.echo(v=1)" if style == "async" else "tools.echo(v=1)"
    program = bridge_helpers() + f"os.close(CTL_IN)\nreturn {call}"
    line = bridge_helpers().count("\n") + 3  # after the naming prelude and the close
    result = await run_hostile(
        rt,
        program,
        bindings={"tools.echo": echo},
        limits=Limits(max_wall_ms=800),
        call_style=style,
    )
    assert not result.has_value
    assert result.stats is not None and result.stats.wall_ms < 800
    if style == "async":  # the program's loop cannot watch the fd it closed: its own error
        expect(result, "exception")
        assert result.error is not None and "Bad file descriptor" in result.error.message
        assert result.error.lineno == line
    else:  # the blocked call reads the closed pipe as the host gone: the child leaves
        expect(result, "died")


@ONE_BACKEND
async def test_a_child_that_never_reads_its_replies_does_not_wedge_the_host(
    rt: SubprocessRuntime,
) -> None:
    async def big(args: Any) -> Any:
        return "x" * 1_000_000

    program = bridge_helpers() + (
        "for i in range(50):\n"
        "    send({'type': 'Call', 'id': 20_000 + i, 'name': 'tools.big', 'args': {}})\n"
        "import time\ntime.sleep(0.5)\nreturn 'fine'\n"
    )
    result = await run_hostile(rt, program, bindings={"tools.big": big})
    assert result.value == "fine"


@ONE_BACKEND
async def test_a_call_flood_settles_within_the_wall_budget(rt: SubprocessRuntime) -> None:
    program = bridge_helpers() + (
        "chunk = b''.join(frame({'type': 'Call', 'id': i, 'name': 'nope', 'args': {}}) "
        "for i in range(1_000_000, 1_006_000))\n"
        "send_raw(chunk)\n"
        "import time\ntime.sleep(60)\n"
    )
    rss = psutil.Process().memory_info().rss
    result = await run_hostile(rt, program, limits=Limits(compute_ms=2_000, max_wall_ms=500))
    expect(result, "budget", "wall")
    assert psutil.Process().memory_info().rss - rss < 300 << 20
    assert result.stats is not None and result.stats.wall_ms < 1_000, result.stats


@ONE_BACKEND
async def test_a_binding_argument_over_the_frame_cap_is_dropped(rt: SubprocessRuntime) -> None:
    called: list[Any] = []

    async def echo(args: Any) -> Any:
        called.append(1)
        return 1

    program = "return await tools.echo(s='x' * (70 << 20))"
    limits = Limits(compute_ms=3_000, max_wall_ms=1_500, max_heap_mb=512)
    result = await run_hostile(rt, program, bindings={"tools.echo": echo}, limits=limits)
    assert not result.has_value
    assert called == []
    assert result.stats is not None and result.stats.dropped_frames == 1


@ONE_BACKEND
async def test_thousands_of_concurrent_binding_calls_are_all_answered(
    rt: SubprocessRuntime,
) -> None:
    active = peak = 0

    async def slow(args: Any) -> Any:
        nonlocal active, peak
        active += 1
        peak = max(peak, active)
        await anyio.sleep(0)
        active -= 1
        return args["i"]

    program = (
        "import asyncio\nreturn await asyncio.gather(*(tools.slow(i=i) for i in range(3000)))\n"
    )
    limits = Limits(compute_ms=3_000, max_wall_ms=10_000, max_parallel_sub_calls=10)
    result = await run_hostile(rt, program, bindings={"tools.slow": slow}, limits=limits)
    assert result.value == list(range(3000))
    assert peak <= 10


async def test_binding_calls_left_pending_at_the_end_are_cancelled(rt: SubprocessRuntime) -> None:
    started = 0
    finished = 0

    async def hang(args: Any) -> Any:
        nonlocal started, finished
        started += 1
        try:
            await anyio.sleep(60)
        finally:
            finished += 1

    program = (
        "import asyncio\n"
        "tasks = [asyncio.ensure_future(tools.hang(i=i)) for i in range(500)]\n"
        "await asyncio.sleep(0.2)\n"
        "return 'left them'\n"
    )
    result = await run_hostile(rt, program, bindings={"tools.hang": hang})
    assert result.value == "left them"
    assert started == 10  # max_parallel_sub_calls of them ran; the rest were still queued
    assert finished == started  # each running one was cancelled before run() returned


# ---- host memory under a flood of calls ---------------------------------------------------------


@ONE_BACKEND
async def test_calls_queued_behind_unread_replies_keep_host_memory_bounded(
    rt: SubprocessRuntime,
) -> None:
    async def big(args: Any) -> Any:
        return "r" * (1 << 20)

    # The child never reads a reply: the workers stall on a full pipe while the child
    # keeps sending calls with 2 MiB of arguments each (1 GiB in all).
    program = bridge_helpers() + (
        "arg = b'\"' + b'a' * (2 << 20) + b'\"'\n"
        "for i in range(500):\n"
        '    send(b\'{"type":"Call","id":%d,"name":"tools.big","args":{"s":%s}}\' '
        "% (30_000 + i, arg))\n"
        "import time\ntime.sleep(30)\n"
    )
    limits = Limits(compute_ms=10_000, max_wall_ms=3_000, max_heap_mb=64)
    with PeakRss() as rss:
        result = await run_hostile(rt, program, bindings={"tools.big": big}, limits=limits)
    assert result.error is not None, result
    if result.error.kind == "output_limit":  # the calls that settled filled the journal first
        assert "max_journal_bytes" in result.error.message, result.error
    else:
        expect(result, "budget", "wall")
    assert rss.grown < 300 << 20, f"host RSS grew {rss.grown >> 20} MiB"


@ONE_BACKEND
async def test_a_flood_of_fresh_call_ids_keeps_host_memory_bounded(rt: SubprocessRuntime) -> None:
    program = bridge_helpers() + (
        "for base in range(0, 2_000_000, 100_000):\n"
        "    send_raw(b''.join(frame({'type': 'Call', 'id': i, 'name': 'nope', "
        "'args': {}}) for i in range(base, base + 100_000)))\n"
        "return 1\n"
    )
    limits = Limits(compute_ms=20_000, max_wall_ms=30_000)
    with PeakRss() as rss:
        await run_hostile(rt, program, limits=limits, timeout=60)
    assert rss.grown < 64 << 20, f"host RSS grew {rss.grown >> 20} MiB"
