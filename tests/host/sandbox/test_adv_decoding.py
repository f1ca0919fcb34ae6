"""Hostile frames shaped to cost the host more when decoded than they weigh on the pipe."""

from __future__ import annotations

import pytest

from host.sandbox import SubprocessRuntime
from runtime import Limits, RunRequest
from tests.host.sandbox.hostile import (
    ONE_BACKEND,
    PeakRss,
    bridge_helpers,
    echo,
    expect,
    loop_stalls,
    run_hostile,
)

pytestmark = pytest.mark.anyio

#: 64 MiB of output is the MCP server's default cap: the worst case a client can send.
_BIG = Limits(compute_ms=5_000, max_wall_ms=20_000, max_output_bytes=64 << 20, max_heap_mb=1024)


def _forged(kind: str, first: str, values: int) -> str:
    """A program that writes one frame of ``kind`` whose JSON is ``values`` empty dicts (the
    child's own checks are the program's to skip: the host is what is under test)."""
    head = {"Done": '"has_value":true,"value"', "Call": '"id":1,"name":"tools.echo","args"'}
    return bridge_helpers() + (
        f"body = b'{{\"type\":\"{kind}\",{head[kind]}:[' + b'{{}},' * {values - 1} + b'{{}}]}}'\n"
        "send(body)\n"
        "import time\ntime.sleep(30)\n"
    )


@ONE_BACKEND
async def test_a_result_of_millions_of_tiny_values_is_refused_before_it_is_decoded(
    rt: SubprocessRuntime,
) -> None:
    # 9 MB of JSON that decodes to 3 million dicts: ~650 MiB and seconds on the host before
    async with loop_stalls() as stalls:
        with PeakRss() as rss:
            result = await run_hostile(rt, _forged("Done", "has_value", 3_000_000), limits=_BIG)
    expect(result, "output_limit")
    assert result.error is not None
    assert "the result holds more than 1000000 JSON values (max_json_values)" in (
        result.error.message
    )
    assert rss.grown < 150 << 20, f"the host grew {rss.grown >> 20} MiB"
    assert stalls.longest < 1.0, f"the event loop stalled {stalls.longest:.2f} s"


async def test_a_result_just_under_the_value_bound_is_decoded_without_a_walk_per_value() -> None:
    # What max_json_values lets through is decoded at C speed; a check per value in Python on
    # the event loop (the lossless-JSON walk took ~1 µs a value) stalled it for seconds here.
    async with SubprocessRuntime(max_json_values=3_000_000) as rt, loop_stalls() as stalls:
        result = await run_hostile(rt, _forged("Done", "has_value", 1_400_000), limits=_BIG)
    assert result.error is None and len(result.value) == 1_400_000
    assert stalls.longest < 1.0, f"the event loop stalled {stalls.longest:.2f} s"


async def test_a_forged_result_nested_too_deep_is_refused() -> None:
    # The child refuses nesting past 500 levels; a forged frame deeper than that (which
    # msgspec still decodes) must be refused by the host too.
    async with SubprocessRuntime() as rt:
        for depth, kind in ((500, None), (501, "invalid_completion"), (700, "invalid_completion")):
            value = "[" * depth + '"]["' + "]" * depth
            program = bridge_helpers() + (
                f'send(b\'{{"type":"Done","has_value":true,"value":{value}}}\')\n'
                "import time\ntime.sleep(30)\n"
            )
            result = await run_hostile(rt, program, limits=_BIG)
            if kind is None:
                assert result.error is None, result.error
            else:
                expect(result, kind)
                assert result.error is not None
                assert "nesting deeper than 500 levels" in result.error.message


@ONE_BACKEND
async def test_call_arguments_of_millions_of_values_fail_the_run(rt: SubprocessRuntime) -> None:
    program = _forged("Call", "id", 2_000_000)
    with PeakRss() as rss:
        result = await run_hostile(rt, program, limits=_BIG, bindings={"tools.echo": echo})
    expect(result, "invalid_completion")
    assert result.error is not None
    assert "the arguments of a binding call hold more than 1000000 JSON values" in (
        result.error.message
    )
    assert rss.grown < 150 << 20, f"the host grew {rss.grown >> 20} MiB"


async def test_the_value_bound_is_configurable_and_strings_do_not_count() -> None:
    async with SubprocessRuntime(max_json_values=100) as rt:
        few = await rt.run(RunRequest(program="return ['a,b:c[d{' * 50] * 20"))
        assert few.error is None
        many = await rt.run(RunRequest(program="return list(range(200))"))
        expect(many, "output_limit")


async def test_an_unknown_binding_name_is_not_echoed_back_larger(rt: SubprocessRuntime) -> None:
    program = bridge_helpers() + (
        "name = 'x' * 4_000_000\n"
        "send({'type': 'Call', 'id': 1, 'name': name, 'args': {}})\n"
        "import select, struct\n"
        "select.select([CTL_IN], [], [], 10)\n"
        "(size,) = struct.unpack('!I', os.read(CTL_IN, 4))\n"
        "return size\n"
    )
    result = await run_hostile(rt, program)
    assert result.error is None, result.error
    assert isinstance(result.value, int) and result.value < 1_000


async def test_a_forged_state_frame_over_max_state_bytes_is_refused_by_the_host(
    rt: SubprocessRuntime,
) -> None:
    import base64

    blob = base64.b64encode(b"s" * 4096).decode()
    program = bridge_helpers() + (
        f"send({{'type': 'State', 'blob': {blob!r}, 'names': ['x'], 'dropped': {{}}}})\nreturn 1\n"
    )
    async with rt.session(max_state_bytes=1024) as session:
        result = await session.run(RunRequest(program=program, limits=Limits(max_wall_ms=5_000)))
        expect(result, "state")
        assert result.error is not None
        assert "max_state_bytes (1024)" in result.error.message
        assert session.state == b""
