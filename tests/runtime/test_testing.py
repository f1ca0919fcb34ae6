"""``runtime.testing.InProcessRuntime``: the fake keeps the real runtime's program semantics."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from runtime import Limits, RunRequest, ToolCallError
from runtime.testing import InProcessRuntime
from tests.conftest import ALL_BACKENDS
from tests.runtime.bare_cases import REFUSED, SHOWN

pytestmark = pytest.mark.anyio


@pytest.fixture(params=ALL_BACKENDS)
def anyio_backend(request: pytest.FixtureRequest) -> object:
    """asyncio as anyio runs it, as plain ``asyncio.run`` runs it, and trio."""
    return request.param


async def _echo(args: dict[str, Any]) -> dict[str, Any]:
    return {"got": args}


async def _refuse(args: dict[str, Any]) -> None:
    raise ToolCallError("tools.refuse", "no, thank you", "REFUSED")


async def _crash(args: dict[str, Any]) -> None:
    raise ValueError("the tool broke")


BINDINGS = {"tools.echo": _echo, "tools.refuse": _refuse, "tools.crash": _crash}


async def _run(program: str, **options: Any) -> Any:
    async with InProcessRuntime() as runtime:
        return await runtime.run(RunRequest(program=program, bindings=BINDINGS, **options))


@pytest.mark.parametrize(
    ("program", "value"),
    [
        ("21 * 2", 42),
        ("x = 1\nreturn x + 1", 2),
        ("import asyncio\nawait asyncio.sleep(0)\n'done'", "done"),
        ("r = await tools.echo(a=1)\nr['got']", {"a": 1}),
        ("r = await tools.echo({'a': 1})\nr", {"got": {"a": 1}}),
        ("__name__", "__main__"),
    ],
)
async def test_programs_end_as_the_real_runtime_ends_them(program: str, value: Any) -> None:
    result = await _run(program)
    assert (result.error, result.value) == (None, value)


async def test_a_program_ending_in_a_statement_has_no_value() -> None:
    result = await _run("x = 1")
    assert (result.error, result.value) == (None, msgspec.UNSET)


async def test_sync_call_style_calls_plainly() -> None:
    result = await _run("r = tools.echo(a=2)\nr['got']['a']", call_style="sync")
    assert (result.error, result.value) == (None, 2)


async def test_tool_errors_reach_the_program_as_tool_call_error() -> None:
    program = (
        "out = []\n"
        "for name in ('refuse', 'crash'):\n"
        "    try:\n"
        "        await getattr(tools, name)()\n"
        "    except ToolCallError as exc:\n"
        "        out.append([exc.tool, exc.code, str(exc)])\n"
        "out"
    )
    result = await _run(program)
    assert result.error is None
    assert [row[:2] for row in result.value] == [
        ["tools.refuse", "REFUSED"],
        ["tools.crash", "TOOL_ERROR"],
    ]
    assert "the tool broke" in result.value[1][2]


async def test_a_builtin_exception_of_a_binding_is_raised_as_that_type() -> None:
    program = (
        "try:\n"
        "    await tools.crash()\n"
        "except ValueError as exc:\n"
        "    return [isinstance(exc, ToolCallError), exc.tool, exc.message]\n"
    )
    result = await _run(program)
    assert (result.error, result.value) == (None, [True, "tools.crash", "the tool broke"])


@pytest.mark.parametrize(
    ("program", "kind"),
    [
        ("def f(:\n  pass", "parse"),
        ("raise KeyError('k')", "exception"),
        ("return {1, 2}", "invalid_completion"),
        ("import asyncio\nawait asyncio.sleep(30)", "budget"),
        ("for i in range(1000):\n    print('x' * 100)", "output_limit"),
        ("'x' * 5000", "output_limit"),
    ],
)
async def test_failures_have_the_real_kinds(program: str, kind: str) -> None:
    result = await _run(program, limits=Limits(max_wall_ms=300, max_output_bytes=4096))
    assert result.error is not None
    assert result.error.kind == kind, result.error.message


async def test_exceptions_name_program_lines() -> None:
    result = await _run("x = 1\nraise KeyError('k')")
    assert (result.error.exception_type, result.error.lineno) == ("KeyError", 2)
    assert 'File "<program>", line 2' in result.error.traceback


async def test_logs_stream_in_order() -> None:
    seen: list[str] = []
    result = await _run("print('a')\nprint('b', 'c', sep='-')\n1", on_log=seen.append)
    assert result.logs == seen == ["a", "b-c"]


@pytest.mark.parametrize(
    ("program", "fragment"),
    [
        ("exec('1')", "`exec` is not available"),
        ("getattr(len, '__self__')", "dunder and private attributes are not available"),
        ("import asyncio\nawait asyncio.sleep(0)\ngetattr(len, '__self__')", "dunder"),
    ],
)
async def test_the_restricted_policy_guards_as_in_the_child(program: str, fragment: str) -> None:
    result = await _run(program, policy="restricted")
    assert result.error is not None
    assert fragment in result.error.message


async def test_the_restricted_policy_keeps_module_semantics_and_tools() -> None:
    program = "import asyncio\nawait asyncio.sleep(0)\nr = await tools.echo(a=3)\nprint('hi')\nr"
    result = await _run(program, policy="restricted")
    assert (result.error, result.value, result.logs) == (None, {"got": {"a": 3}}, ["hi"])


async def test_a_closed_runtime_refuses_runs() -> None:
    from runtime import RuntimeClosedError

    runtime = InProcessRuntime()
    await runtime.aclose()
    with pytest.raises(RuntimeClosedError):
        await runtime.run(RunRequest(program="1"))


async def test_awaiting_programs_get_asyncio_whatever_the_callers_loop() -> None:
    program = (
        "import asyncio\n"
        "rs = await asyncio.gather(*(tools.echo(i=i) for i in range(3)))\n"
        "[r['got']['i'] for r in rs]"
    )
    result = await _run(program)
    assert (result.error, result.value) == (None, [0, 1, 2])


async def test_sync_calls_from_an_awaiting_program_block_its_own_loop() -> None:
    program = "import asyncio\nawait asyncio.sleep(0)\ntools.echo(a=1)['got']"
    result = await _run(program, call_style="sync")
    assert (result.error, result.value) == (None, {"a": 1})


async def test_the_wall_budget_stops_a_program_on_its_own_loop() -> None:
    program = "import asyncio\nawait asyncio.sleep(0)\nwhile True:\n    await asyncio.sleep(0.01)"
    result = await _run(program, call_style="sync", limits=Limits(max_wall_ms=200))
    assert result.error is not None and result.error.budget == "wall"


async def test_calls_are_numbered_in_the_programs_order_of_issue() -> None:
    from runtime import current_call

    seen: list[str] = []

    async def record(args: Any) -> Any:
        info = current_call.get()
        assert info is not None
        seen.append(info.call_id)
        return None

    async with InProcessRuntime() as rt:
        result = await rt.run(
            RunRequest(
                program="await tools.r()\nawait tools.r()",
                bindings={"tools.r": record},
                run_id="x",
            )
        )
    assert result.ok, result.error
    assert seen == ["x:1", "x:2"]


@pytest.mark.parametrize(("program", "value", "is_repr"), SHOWN)
async def test_a_bare_last_expression_that_is_not_json_is_its_repr(
    program: str, value: Any, is_repr: bool
) -> None:
    result = await _run(program)
    assert result.error is None
    assert (result.value, result.value_is_repr) == (value, is_repr)
    assert result.to_json().get("value_is_repr", False) is is_repr


@pytest.mark.parametrize(("program", "message"), REFUSED)
async def test_a_returned_value_that_is_not_json_stays_a_failure(
    program: str, message: str
) -> None:
    result = await _run(program)
    assert result.error is not None and result.error.kind == "invalid_completion"
    assert message in result.error.message
    assert "value_is_repr" not in result.to_json()
