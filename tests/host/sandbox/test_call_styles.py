"""Both call styles over one wire: awaited and plain binding calls from any thread or loop."""

from __future__ import annotations

import time
from typing import Any

import anyio
import pytest

from host.sandbox import SubprocessRuntime
from runtime import Limits, RunRequest, RunResult, current_call

pytestmark = pytest.mark.anyio

LIMITS = Limits(compute_ms=5_000, max_wall_ms=20_000)


async def _echo(args: Any) -> Any:
    return args


async def _slow(args: Any) -> Any:
    await anyio.sleep(0.1)
    return args["i"]


async def _fail(args: Any) -> Any:
    raise RuntimeError("it broke")


async def run(rt: SubprocessRuntime, program: str, style: str) -> RunResult:
    return await rt.run(
        RunRequest(
            program=program,
            bindings={"tools.echo": _echo, "tools.slow": _slow, "tools.fail": _fail},
            call_style=style,  # type: ignore[arg-type]
            limits=LIMITS,
        )
    )


async def test_an_awaited_call_and_a_plain_call(rt: SubprocessRuntime) -> None:
    awaited = await run(rt, "return await tools.echo(a=1)", "async")
    plain = await run(rt, "return tools.echo(a=1)", "sync")
    assert awaited.value == plain.value == {"a": 1}


async def test_a_plain_call_needs_no_event_loop_and_sees_failures(rt: SubprocessRuntime) -> None:
    program = (
        "import asyncio\n"
        "try:\n    asyncio.get_running_loop()\n    loop = 'running'\n"
        "except RuntimeError:\n    loop = 'none'\n"
        "try:\n    tools.fail()\nexcept ToolCallError as e:\n    err = [e.tool, e.message]\n"
        "[loop, err, tools.echo({'d': 1})]\n"
    )
    result = await run(rt, program, "sync")
    assert result.value == ["none", ["tools.fail", "it broke"], {"d": 1}]


async def test_plain_calls_from_threads_overlap(rt: SubprocessRuntime) -> None:
    program = (
        "from concurrent.futures import ThreadPoolExecutor\n"
        "with ThreadPoolExecutor(10) as pool:\n"
        "    return list(pool.map(lambda i: tools.slow(i=i), range(10)))\n"
    )
    start = time.monotonic()
    result = await run(rt, program, "sync")
    assert result.value == list(range(10)), result.error
    assert time.monotonic() - start < 2.0  # they overlap (serial would take 1 s + the run)


async def test_awaited_calls_overlap_under_gather(rt: SubprocessRuntime) -> None:
    program = (
        "import asyncio, time\n"
        "start = time.monotonic()\n"
        "values = await asyncio.gather(*(tools.slow(i=i) for i in range(10)))\n"
        "return [values, time.monotonic() - start]\n"
    )
    result = await run(rt, program, "async")
    values, elapsed = result.value
    assert values == list(range(10))
    assert elapsed < 0.6  # 10 x 100 ms at once, not one after another (the benchmark: < 130 ms)


async def test_awaited_calls_inside_the_programs_own_asyncio_run(rt: SubprocessRuntime) -> None:
    # a script ending with asyncio.run(main()), with and without top-level awaits around it
    program = (
        "import asyncio\n"
        "async def main():\n    return await asyncio.gather(tools.echo(n=1), tools.echo(n=2))\n"
        "first = asyncio.run(main())\n"
    )
    plain = await run(rt, program + "first\n", "async")
    assert plain.value == [{"n": 1}, {"n": 2}]
    nested = await run(rt, program + "second = await tools.echo(n=3)\n[first, second]\n", "async")
    assert nested.value == [[{"n": 1}, {"n": 2}], {"n": 3}]


async def test_awaited_calls_from_a_thread_with_its_own_loop(rt: SubprocessRuntime) -> None:
    program = (
        "import asyncio, threading\n"
        "out = []\n"
        "t = threading.Thread(target=lambda: out.append(asyncio.run(tools.echo(t=1))))\n"
        "t.start(); t.join()\n"
        "out.append(await tools.echo(m=1))\n"
        "out\n"
    )
    result = await run(rt, program, "async")
    assert result.value == [{"t": 1}, {"m": 1}]


async def test_a_forgotten_await_says_so_where_it_is_used(rt: SubprocessRuntime) -> None:
    result = await run(rt, "x = tools.echo(a=1)\nreturn x['a']", "async")
    assert result.error is not None and result.error.kind == "exception"
    assert "tools.echo" in result.error.message and "forget await" in result.error.message
    assert result.error.lineno == 2
    returned = await run(rt, "return tools.echo(a=1)", "async")
    assert returned.error is not None and returned.error.kind == "invalid_completion"
    assert "did you forget `await`" in returned.error.message


async def test_a_missing_tool_names_the_tools_there_are(rt: SubprocessRuntime) -> None:
    result = await run(rt, "return tools.ecko(a=1)", "sync")
    assert result.error is not None and result.error.exception_type == "AttributeError"
    assert "tools has no binding 'ecko'" in result.error.message
    assert "Did you mean echo?" in result.error.message
    assert "echo, fail, slow" in result.error.message


async def test_an_unknown_call_style_is_a_caller_error(rt: SubprocessRuntime) -> None:
    from runtime import RuntimeUsageError

    with pytest.raises(RuntimeUsageError, match="call_style"):
        await rt.run(RunRequest(program="1", call_style="blocking"))  # type: ignore[arg-type]


@pytest.mark.parametrize("style", ["async", "sync"])
async def test_each_call_knows_its_run_and_its_place_in_the_programs_order(
    rt: SubprocessRuntime, style: str
) -> None:
    seen: list[str] = []

    async def record(args: Any) -> Any:
        info = current_call.get()
        assert info is not None
        seen.append(f"{info.call_id}={args['i']}")
        await anyio.sleep(0.05 if args["i"] == 2 else 0)  # replies come out of order
        return args["i"]

    if style == "async":
        program = (
            "import asyncio\nawait tools.record(i=1)\n"
            "await asyncio.gather(*(tools.record(i=i) for i in (2, 3, 4)))\n"
        )
    else:
        program = "tools.record(i=1)\nfor i in (2, 3, 4):\n    tools.record(i=i)\n"
    result = await rt.run(
        RunRequest(
            program=program,
            bindings={"tools.record": record},
            call_style=style,  # type: ignore[arg-type]
            limits=LIMITS,
            run_id="run-7",
        )
    )
    assert result.ok, result.error
    assert sorted(seen) == ["run-7:1=1", "run-7:2=2", "run-7:3=3", "run-7:4=4"]
    assert current_call.get() is None


async def test_a_run_without_an_id_gets_one_of_its_own(rt: SubprocessRuntime) -> None:
    seen: list[str] = []

    async def record(args: Any) -> Any:
        info = current_call.get()
        assert info is not None
        seen.append(info.run_id)
        return None

    for _ in range(2):
        result = await rt.run(
            RunRequest(program="await tools.record()", bindings={"tools.record": record})
        )
        assert result.ok, result.error
    assert len(set(seen)) == 2 and all(seen)


async def _raise(args: Any) -> Any:
    kind = args["kind"]
    if kind == "zero":
        return 1 / 0
    if kind == "key":
        return dict[str, int]()["missing"]
    if kind == "json":  # a ValueError subclass of a library: raised as its builtin base
        import json

        return json.loads("{")
    raise LookupError_(kind)


class LookupError_(Exception):  # a tool's own exception type, named like a builtin
    """Not a builtin: the program sees a plain ToolCallError."""


@pytest.mark.parametrize("style", ["async", "sync"])
async def test_a_builtin_exception_of_a_binding_is_raised_as_that_type(
    rt: SubprocessRuntime, style: str
) -> None:
    call = "await tools.boom" if style == "async" else "tools.boom"
    program = (
        "out = []\n"
        "try:\n"
        f"    {call}(kind='zero')\n"
        "except ZeroDivisionError as e:\n"
        "    out.append(['zero', isinstance(e, ToolCallError), e.tool, e.code, type(e).__name__])\n"
        "try:\n"
        f"    {call}(kind='key')\n"
        "except KeyError as e:\n"
        "    out.append(['key', isinstance(e, LookupError), e.message])\n"
        "try:\n"
        f"    {call}(kind='json')\n"
        "except ValueError as e:\n"
        "    out.append(['json', isinstance(e, ToolCallError)])\n"
        "try:\n"
        f"    {call}(kind='own')\n"
        "except Exception as e:\n"
        "    out.append(['own', type(e) is ToolCallError])\n"
        "out\n"
    )
    result = await rt.run(
        RunRequest(
            program=program,
            bindings={"tools.boom": _raise},
            call_style=style,  # type: ignore[arg-type]
            limits=LIMITS,
        )
    )
    assert result.error is None, result.error
    assert result.value == [
        ["zero", True, "tools.boom", "TOOL_ERROR", "ZeroDivisionError"],
        ["key", True, "'missing'"],
        ["json", True],
        ["own", True],
    ]


async def test_an_uncaught_builtin_failure_reads_as_its_type(rt: SubprocessRuntime) -> None:
    result = await rt.run(
        RunRequest(
            program="await tools.boom(kind='zero')",
            bindings={"tools.boom": _raise},
            limits=LIMITS,
        )
    )
    assert result.error is not None
    assert result.error.exception_type == "ZeroDivisionError"
    assert "ZeroDivisionError: tools.boom: division by zero (TOOL_ERROR)" in result.error.message
