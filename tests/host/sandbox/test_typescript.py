"""TypeScriptRuntime's own semantics: the program's world, types, JSON across the bridge, refusals."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from host.sandbox import TypeScriptRuntime
from runtime import Limits, RunRequest, RunResult, RuntimeUsageError

pytestmark = pytest.mark.anyio

FAST = Limits(compute_ms=3_000, max_wall_ms=15_000)


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> object:
    """The contract suite covers every loop; these need two."""
    return request.param


async def _echo(args: Any) -> Any:
    return args


async def _big(args: Any) -> Any:
    return {"big": 2**60 + 1, "small": 7, "float": 0.5, "neg": -(2**70)}


async def run(ts: TypeScriptRuntime, program: str, **kwargs: Any) -> RunResult:
    kwargs.setdefault("limits", FAST)
    kwargs.setdefault("bindings", {"tools.echo": _echo, "tools.big": _big})
    return await ts.run(RunRequest(program=program, **kwargs))


async def test_enum_namespace_and_types_are_typescript(ts: TypeScriptRuntime) -> None:
    program = (
        "enum Color { Red, Green = 'green' }\n"
        "namespace Geo { export const origin: [number, number] = [0, 0]; }\n"
        "interface P { x: number }\n"
        "const p: P = { x: 2 };\n"
        "type Pair<T> = [T, T];\n"
        "const pair: Pair<string> = ['a', 'b'];\n"
        "return [Color.Red, Color.Green, Geo.origin, p.x as number, pair];"
    )
    result = await run(ts, program)
    assert result.value == [0, "green", [0, 0], 2, ["a", "b"]], result.error


async def test_lines_are_the_programs_own_after_transformed_code(ts: TypeScriptRuntime) -> None:
    # enum and namespace become several lines of JavaScript; the stack still names program lines
    program = (
        "enum E { A, B, C }\n"
        "namespace N { export const v = 1; }\n"
        "function inner(): never {\n"
        "  throw new TypeError('deep ' + E.C);\n"
        "}\n"
        "const outer = () => inner();\n"
        "outer();"
    )
    result = await run(ts, program)
    error = result.error
    assert error is not None and error.kind == "exception"
    assert (error.exception_type, error.lineno) == ("TypeError", 4)
    assert error.traceback == (
        "TypeError: deep 2\n    at inner (<program>:4:9)\n    at outer (<program>:6:21)\n"
        "    at <program>:7:1"
    )


async def test_top_level_await_and_return(ts: TypeScriptRuntime) -> None:
    program = "const v = await Promise.resolve(41);\nif (v > 40) {\n  return v + 1;\n}\nreturn 0;"
    assert (await run(ts, program)).value == 42


async def test_a_type_error_is_not_a_parse_error(ts: TypeScriptRuntime) -> None:
    # types are stripped, not checked, at run time (`dsh-code check` checks them)
    result = await run(ts, "const n: number = 'text' as any;\nreturn n;")
    assert result.value == "text"


@pytest.mark.parametrize(
    ("program", "lineno", "needle"),
    [
        ("const a = 1;\nconst b = ;", 2, "SyntaxError"),
        ("let x: = 1;", 1, "Unexpected token"),
        ("import fs from 'node:fs';", 1, "module"),
        ("const o = {};\nwith (o) {}", None, "with"),
        ("class A { @dec m() {} }", None, "SyntaxError"),
    ],
)
async def test_syntax_errors_are_parse_failures(
    ts: TypeScriptRuntime, program: str, lineno: int | None, needle: str
) -> None:
    result = await run(ts, program)
    assert result.error is not None and result.error.kind == "parse"
    assert result.error.lineno == lineno
    assert needle in result.error.message
    assert result.stats is not None and result.stats.compute_ms == 0


async def test_integers_past_2_53_arrive_as_bigint_and_go_back_as_integers(
    ts: TypeScriptRuntime,
) -> None:
    program = (
        "const v = await tools.big();\n"
        "return [typeof v.big, v.big === 2n ** 60n + 1n, typeof v.small, v.float, v.neg * 2n,"
        " 2 ** 60];"
    )
    result = await run(ts, program)
    assert result.value == ["bigint", True, "number", 0.5, -(2**71), 2**60]


async def test_inputs_keep_big_integers(ts: TypeScriptRuntime) -> None:
    result = await run(ts, "return [typeof n, n + 1n];", inputs={"n": 2**64})
    assert result.value == ["bigint", 2**64 + 1]


@pytest.mark.parametrize(
    ("program", "needle"),
    [
        ("return [1, undefined];", "undefined at $[1]"),
        ("return { f() {} };", "a function at $.f"),
        ("return { s: Symbol('x') };", "a symbol at $.s"),
        ("return { m: new Map() };", "a Map at $.m"),
        ("return [Infinity];", "Infinity at $[0]"),
        ("return { p: tools.echo({}) };", "did you forget await"),
        ("return '\\ud800';", "lone surrogate"),
        ("return 10n ** 5000n;", "more than 4300 digits"),
        ("class C { x = 1 }\nreturn new C();", "a C at $"),
        ("return new Array(5);", "undefined at $[0]"),
        (
            "const a: unknown[] = [];\nfor (let i = 0; i < 600; i++) a.push([]);\n"
            "let d: unknown[] = []; const top = d;\nfor (let i = 0; i < 600; i++) { const n: unknown[] = []; d.push(n); d = n; }\n"
            "return top;",
            "deeper than 500",
        ),
    ],
)
async def test_results_that_are_not_lossless_json(
    ts: TypeScriptRuntime, program: str, needle: str
) -> None:
    result = await run(ts, program)
    assert result.error is not None and result.error.kind == "invalid_completion", result
    assert needle in result.error.message, result.error.message


async def test_to_json_is_honoured_and_dates_become_text(ts: TypeScriptRuntime) -> None:
    program = (
        "return { when: new Date(0), custom: { toJSON: () => ({ n: 1 }) }, "
        "n: new Number(2).valueOf() };"
    )
    result = await run(ts, program)
    assert result.value == {"when": "1970-01-01T00:00:00.000Z", "custom": {"n": 1}, "n": 2}


async def test_an_absent_result_and_undefined_are_the_same(ts: TypeScriptRuntime) -> None:
    for program in ("const x = 1;", "return;", "return undefined;"):
        result = await run(ts, program)
        assert (result.ok, result.has_value) == (True, False), program


async def test_bindings_are_own_properties_of_a_frozen_namespace(ts: TypeScriptRuntime) -> None:
    program = (
        "const probes = ['constructor', 'toString', '__proto__', 'hasOwnProperty', 'nope']"
        ".map((k) => typeof (tools as any)[k]);\n"
        "let assigned = 'no';\n"
        "try { (tools as any).echo = () => 1; } catch (e) { assigned = (e as Error).name; }\n"
        "return [Object.keys(tools).sort(), probes, assigned, Object.getPrototypeOf(tools)];"
    )
    result = await run(ts, program)
    assert result.value == [
        ["big", "echo"],
        ["undefined"] * 5,
        "TypeError",
        None,
    ]


async def test_tool_call_error_is_a_global_class(ts: TypeScriptRuntime) -> None:
    async def denied(args: Any) -> Any:
        from runtime import ToolCallError

        raise ToolCallError("tools.denied", "no way", "DENIED")

    program = (
        "try {\n  await tools.denied({});\n} catch (e) {\n"
        "  return [e instanceof ToolCallError, e instanceof Error, (e as any).name,"
        " (e as any).tool, (e as any).code, (e as Error).message];\n}"
    )
    result = await run(ts, program, bindings={"tools.denied": denied})
    assert result.value == [True, True, "ToolCallError", "tools.denied", "DENIED", "no way"]


async def test_a_binding_takes_one_object(ts: TypeScriptRuntime) -> None:
    result = await run(ts, "return [await tools.echo(), await tools.echo({ a: 1 })];")
    assert result.value == [{}, {"a": 1}]
    result = await run(ts, "await (tools.echo as any)({ a: 1 }, 2);")
    assert result.error is not None and result.error.kind == "exception"
    assert "one object of arguments" in result.error.message


async def test_an_unhandled_rejection_fails_the_run(ts: TypeScriptRuntime) -> None:
    program = "Promise.reject(new Error('nobody catches me'));\nawait new Promise((r) => setTimeout(r, 100));"
    result = await run(ts, program)
    assert result.error is not None and result.error.kind == "exception"
    assert "Uncaught (in promise) Error: nobody catches me" in result.error.message


async def test_a_thrown_value_that_is_not_an_error(ts: TypeScriptRuntime) -> None:
    result = await run(ts, "throw { code: 7 };")
    assert result.error is not None and result.error.kind == "exception"
    assert "code: 7" in result.error.message


async def test_console_methods_go_to_the_logs_in_order(ts: TypeScriptRuntime) -> None:
    program = (
        "console.log('a', 1, { b: [2] });\nconsole.info('i');\nconsole.debug('d');\n"
        "console.warn('w');\nconsole.error('e');\nconsole.log('%s=%d', 'x', 5);\n"
        "process.stdout.write('raw\\n');\nconsole.log(12n, null, undefined);"
    )
    result = await run(ts, program)
    assert result.logs == [
        "a 1 { b: [ 2 ] }",
        "i",
        "d",
        "w",
        "e",
        "x=5",
        "raw",
        "12n null undefined",
    ]


async def test_sessions_and_other_policies_are_refused(ts: TypeScriptRuntime) -> None:
    with pytest.raises(RuntimeUsageError, match="sessions are not available"):
        ts.session()
    with pytest.raises(RuntimeUsageError, match="Python programs"):
        await ts.run(RunRequest(program="1", policy="restricted"))
    with pytest.raises(RuntimeUsageError, match="await"):
        await ts.run(RunRequest(program="1", call_style="sync"))
    assert ts.language == "typescript"


async def test_the_spare_pool_grows_when_runs_find_no_spare_ready(workdir_root: str) -> None:
    async with TypeScriptRuntime(workdir_root=workdir_root, prefork=1) as ts:
        for spare in ts._spares:  # taken from under the runtime: the next run finds none
            spare.discard()
            ts._rooms.free(spare)
        ts._spares = []
        assert ts._prefork == 1
        result = await ts.run(RunRequest(program="return 1;"))
        assert result.value == 1
        assert ts._prefork == 2  # a fresh child was not ready at once: one more spare ahead


async def test_a_large_reply_arrives_whole_and_in_time(ts: TypeScriptRuntime) -> None:
    async def text(args: Any) -> Any:
        return "é" * (10 << 20)  # 20 MiB of UTF-8, read in many pieces

    program = "const t = await tools.text();\nreturn [t.length, t.slice(-2)];"
    with anyio.fail_after(60):
        result = await run(ts, program, bindings={"tools.text": text})
    assert result.value == [10 << 20, "éé"], result.error


async def test_a_program_that_crashes_the_front_end_is_rejected_and_the_next_runs(
    ts: TypeScriptRuntime,
) -> None:
    deep = "return " + "(" * 200_000 + "1" + ")" * 200_000 + ";"  # the parser's stack gives out
    result = await run(ts, deep)
    assert result.error is not None and result.error.kind == "parse"
    assert "front end could not parse" in result.error.message
    assert (await run(ts, "return 2;")).value == 2  # a fresh front end
