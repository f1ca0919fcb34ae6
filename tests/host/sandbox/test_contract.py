"""The CodeRuntime contract, once for both languages: results, failure kinds, limits, calls, aborts."""

from __future__ import annotations

import os
import signal
from collections.abc import AsyncIterator
from typing import Any

import anyio
import psutil
import pytest

from host.sandbox import SubprocessRuntime, TypeScriptRuntime
from runtime import CodeRuntime, Limits, RunRequest, RunResult, RuntimeClosedError, ToolCallError
from runtime.lowlevel import descendants
from tests.host.sandbox.conftest import open_fds, our_cgroups

pytestmark = pytest.mark.anyio

FAST = Limits(compute_ms=2_000, max_wall_ms=10_000)
#: A generous bound on how far past a 150 ms compute budget a run may be stopped (a sanity
#: bound under load; the benchmarks measure the real figure).
_BUDGET_SLACK_MS = 1_200


@pytest.fixture(params=["python", "typescript"])
def language(request: pytest.FixtureRequest) -> str:
    """Each contract test runs for both languages."""
    return str(request.param)


@pytest.fixture
async def crt(workdir_root: str, isolation: str, language: str) -> AsyncIterator[CodeRuntime]:
    """A fresh runtime of the language; after the test nothing it started may be left."""
    runtime: SubprocessRuntime = (
        TypeScriptRuntime(workdir_root=workdir_root, isolation=isolation)
        if language == "typescript"
        else SubprocessRuntime(workdir_root=workdir_root, isolation=isolation)
    )
    fds_before = open_fds()
    async with runtime:
        yield runtime
    assert psutil.Process().children(recursive=True) == []
    assert os.listdir(workdir_root) == []
    assert our_cgroups() == []
    assert open_fds() - fds_before == set()


async def _add(args: Any) -> Any:
    return args["a"] + args["b"]


async def _echo(args: Any) -> Any:
    return args


async def _fail(args: Any) -> Any:
    raise ToolCallError("tools.fail", "it broke", "TOOL_ERROR")


async def run(rt: CodeRuntime, program: str, **kwargs: Any) -> RunResult:
    kwargs.setdefault("limits", FAST)
    kwargs.setdefault("bindings", {"tools.add": _add, "tools.echo": _echo, "tools.fail": _fail})
    return await rt.run(RunRequest(program=program, **kwargs))


def pick(rt: CodeRuntime, python: str, typescript: str) -> str:
    """The program of the runtime's language."""
    return typescript if rt.language == "typescript" else python


async def test_it_is_a_code_runtime(crt: CodeRuntime, isolation: str, language: str) -> None:
    assert isinstance(crt, CodeRuntime)
    assert crt.language == language
    assert crt.isolation == isolation
    result = await run(crt, pick(crt, "return 1", "return 1"))
    assert result.value == 1
    assert result.stats is not None and result.stats.isolation == isolation


async def test_a_program_calls_bindings_and_returns_json(crt: CodeRuntime) -> None:
    program = pick(
        crt,
        "print('adding')\nreturn await tools.add(a=2, b=3)",
        "console.log('adding');\nreturn await tools.add({ a: 2, b: 3 });",
    )
    result = await run(crt, program)
    assert (result.error, result.value, result.logs) == (None, 5, ["adding"])
    assert result.stats is not None and result.stats.calls == 1


async def test_absent_and_null_results_stay_distinct(crt: CodeRuntime) -> None:
    absent = await run(crt, pick(crt, "x = 1", "const x = 1;"))
    null = await run(crt, pick(crt, "return None", "return null;"))
    nested = await run(
        crt, pick(crt, "return {'a': [1, 2.5, None, True]}", "return { a: [1, 2.5, null, true] };")
    )
    assert (absent.ok, absent.has_value) == (True, False)
    assert "value" not in absent.to_json()
    assert (null.has_value, null.value) == (True, None)
    assert nested.value == {"a": [1, 2.5, None, True]}


async def test_inputs_are_globals(crt: CodeRuntime) -> None:
    program = pick(
        crt,
        "return {'doubled': [n * 2 for n in numbers], 'name': name}",
        "return { doubled: numbers.map((n: number) => n * 2), name };",
    )
    result = await run(crt, program, inputs={"numbers": [1, 2], "name": "x"})
    assert result.value == {"doubled": [2, 4], "name": "x"}


async def test_gathered_binding_calls_overlap(crt: CodeRuntime) -> None:
    async def slow(args: Any) -> Any:
        await anyio.sleep(0.2)
        return args["i"]

    program = pick(
        crt,
        "import asyncio\nreturn await asyncio.gather(*(tools.slow(i=i) for i in range(10)))",
        "return await Promise.all([...Array(10).keys()].map((i) => tools.slow({ i })));",
    )
    with anyio.fail_after(1.5):  # serial would take 2 s
        result = await run(crt, program, bindings={"tools.slow": slow})
    assert result.value == list(range(10))


async def test_parallel_sub_calls_are_bounded_and_start_in_order(crt: CodeRuntime) -> None:
    active = peak = 0
    started: list[int] = []

    async def probe(args: Any) -> Any:
        nonlocal active, peak
        started.append(args["i"])
        active += 1
        peak = max(peak, active)
        await anyio.sleep(0.02)
        active -= 1
        return args["i"]

    limits = Limits(compute_ms=2_000, max_wall_ms=10_000, max_parallel_sub_calls=3)
    program = pick(
        crt,
        "import asyncio\nreturn await asyncio.gather(*(tools.probe(i=i) for i in range(12)))",
        "return await Promise.all([...Array(12).keys()].map((i) => tools.probe({ i })));",
    )
    result = await run(crt, program, bindings={"tools.probe": probe}, limits=limits)
    assert result.value == list(range(12))
    assert peak == 3
    assert started == list(range(12))


async def test_a_failed_binding_raises_tool_call_error_in_the_program(crt: CodeRuntime) -> None:
    async def plain(args: Any) -> Any:
        raise KeyError("nope")

    program = pick(
        crt,
        "out = []\nfor name in ('fail', 'plain'):\n    try:\n        await getattr(tools, name)()\n"
        "    except ToolCallError as e:\n        out.append([e.tool, e.code])\nreturn out",
        "const out = [];\nfor (const name of ['fail', 'plain'] as const) {\n  try {\n"
        "    await tools[name]();\n  } catch (e) {\n"
        "    if (e instanceof ToolCallError) out.push([e.tool, e.code]);\n  }\n}\nreturn out;",
    )
    result = await run(
        crt, program, bindings={"tools.fail": _fail, "tools.plain": plain, "tools.add": _add}
    )
    assert result.value == [["tools.fail", "TOOL_ERROR"], ["tools.plain", "TOOL_ERROR"]]
    message = pick(
        crt,
        "try:\n    await tools.fail()\nexcept ToolCallError as e:\n    return e.message",
        "try { await tools.fail(); } catch (e) { return (e as Error).message; }",
    )
    assert (await run(crt, message)).value == "it broke"


async def test_an_uncaught_tool_call_error_is_an_exception_failure(crt: CodeRuntime) -> None:
    result = await run(
        crt, pick(crt, "x = 1\nawait tools.fail()", "const x = 1;\nawait tools.fail();")
    )
    assert result.error is not None and result.error.kind == "exception"
    assert result.error.exception_type == "ToolCallError"
    assert result.error.lineno == 2


async def test_exceptions_report_type_text_and_program_lines_only(crt: CodeRuntime) -> None:
    program = pick(
        crt,
        "def f(x):\n    raise ValueError(f'bad {x}')\n\nf(0)",
        "function f(x: number): number {\n  throw new RangeError(`bad ${x}`);\n}\n\nf(0);",
    )
    result = await run(crt, program)
    error = result.error
    assert error is not None and error.kind == "exception"
    name = pick(crt, "ValueError", "RangeError")
    assert error.exception_type == name
    assert f"{name}: bad 0" in error.message
    assert error.lineno == 2
    trace = error.traceback or ""
    assert pick(crt, 'File "<program>", line 4', "<program>:5:") in trace
    assert pick(crt, 'File "<program>", line 2, in f', "at f (<program>:2:") in trace
    for ours in ("runtime", "_typescript_child", "ext:", "stripTypeScriptTypes", "__dsh"):
        assert ours not in trace.replace("<program>", "")


async def test_results_that_are_not_lossless_json_are_invalid(crt: CodeRuntime) -> None:
    cases = pick(
        crt,
        "return float('nan')|x = []\nx.append(x)\nreturn x|return {'a': {1, 2}}",
        "return NaN;|const x: unknown[] = [];\nx.push(x);\nreturn x;|return { a: new Set([1]) };",
    ).split("|")
    needles = ["nan" if crt.language == "python" else "NaN", "cycle", "$.a"]
    for program, needle in zip(cases, needles, strict=True):
        result = await run(crt, program)
        assert result.error is not None and result.error.kind == "invalid_completion", program
        assert needle in result.error.message, result.error.message


async def test_binding_arguments_and_replies_follow_the_json_rule(crt: CodeRuntime) -> None:
    result = await run(
        crt, pick(crt, "await tools.echo(x=(1, 2))", "await tools.echo({ x: () => 1 });")
    )
    assert result.error is not None and result.error.kind == "invalid_completion"
    assert "tools.echo" in result.error.message and "$.x" in result.error.message

    async def bad(args: Any) -> Any:
        return {"v": float("inf")}

    result = await run(
        crt, pick(crt, "await tools.bad()", "await tools.bad();"), bindings={"tools.bad": bad}
    )
    assert result.error is not None and result.error.kind == "invalid_completion"
    assert "$.v" in result.error.message


async def test_big_integers_and_unicode_survive(crt: CodeRuntime) -> None:
    program = pick(
        crt,
        "v = await tools.echo(n=2**100, s='héllo ☃ \\U0001F600')\nreturn [v, 2**70, v['n'] + 1]",
        "const v = await tools.echo({ n: 2n ** 100n, s: 'héllo ☃ \\u{1F600}' });\n"
        "return [v, 2n ** 70n, v.n + 1n];",
    )
    result = await run(crt, program)
    assert result.value == [{"n": 2**100, "s": "héllo ☃ \U0001f600"}, 2**70, 2**100 + 1]


async def test_a_program_that_does_not_parse_starts_no_child(crt: CodeRuntime) -> None:
    assert isinstance(crt, SubprocessRuntime)
    await run(crt, pick(crt, "1", "1;"))
    template = crt._template
    assert template is not None and template.pid is not None

    def children() -> set[int]:
        return {p.pid for p in psutil.Process(template.pid).children()}

    with anyio.fail_after(20):  # the spares asked for are forked, the first run's child gone
        while len(crt._spares) < crt._prefork or children() != {s.pid for s in crt._spares}:
            for spare in crt._spares:
                if spare.pid is None:
                    await spare.wait_pid()
            await anyio.sleep(0.01)
    before = children()
    result = await run(crt, pick(crt, "x = 1\ny = (\n", "const x = 1;\nlet y: = (;\n"))
    assert result.error is not None and result.error.kind == "parse"
    assert result.error.lineno == 2
    assert "SyntaxError" in result.error.message
    assert children() == before  # no child forked, none used


async def test_compute_budget(crt: CodeRuntime) -> None:
    program = pick(
        crt, "print('spinning')\nwhile True:\n    pass", "console.log('spinning');\nwhile (true) {}"
    )
    result = await run(crt, program, limits=Limits(compute_ms=150))
    assert result.error is not None
    assert (result.error.kind, result.error.budget) == ("budget", "compute")
    assert result.logs == ["spinning"]
    assert result.stats is not None and 150 <= result.stats.compute_ms < 150 + _BUDGET_SLACK_MS


async def test_waiting_on_a_binding_does_not_bill_compute(crt: CodeRuntime) -> None:
    async def slow(args: Any) -> Any:
        await anyio.sleep(0.6)
        return 1

    result = await run(
        crt,
        pick(crt, "return await tools.slow()", "return await tools.slow();"),
        bindings={"tools.slow": slow},
        limits=Limits(compute_ms=300),
    )
    assert result.value == 1


async def test_wall_budget(crt: CodeRuntime) -> None:
    program = pick(
        crt,
        "import asyncio\nawait asyncio.sleep(60)",
        "await new Promise((r) => setTimeout(r, 60_000));",
    )
    result = await run(crt, program, limits=Limits(max_wall_ms=300))
    assert result.error is not None
    assert (result.error.kind, result.error.budget) == ("budget", "wall")


async def test_output_limit_keeps_the_logs_that_fit(crt: CodeRuntime) -> None:
    program = pick(
        crt,
        "for i in range(100000):\n    print('line', i)",
        "for (let i = 0; i < 100000; i++) console.log('line', i);",
    )
    result = await run(crt, program, limits=Limits(max_output_bytes=1000))
    assert result.error is not None and result.error.kind == "output_limit"
    assert result.logs[0] == "line 0"
    assert sum(len(x) + 1 for x in result.logs) <= 1000 + 20


async def test_a_result_or_a_report_over_the_output_limit(crt: CodeRuntime) -> None:
    limits = Limits(max_output_bytes=10_000)
    result = await run(
        crt, pick(crt, "return 'x' * 50000", "return 'x'.repeat(50000);"), limits=limits
    )
    assert result.error is not None and result.error.kind == "output_limit"
    program = pick(
        crt, "raise ValueError('x' * 1_000_000)", "throw new Error('x'.repeat(1_000_000));"
    )
    result = await run(crt, program, limits=limits)
    assert result.error is not None and result.error.kind == "output_limit"
    assert len(result.error.message) < 1000


async def test_heap_cap(crt: CodeRuntime) -> None:
    program = pick(
        crt,
        "xs = []\nwhile True:\n    xs.append(bytearray(1 << 20))",
        "const xs: number[][] = [];\nwhile (true) xs.push(new Array(1 << 17).fill(1.5));",
    )
    limits = Limits(max_heap_mb=64, compute_ms=20_000, max_wall_ms=30_000)
    result = await run(crt, program, limits=limits)
    assert result.error is not None and result.error.kind == "memory", result.error
    assert "heap" in result.error.message or "memory" in result.error.message


async def test_a_child_killed_by_a_signal_has_died_with_it(crt: CodeRuntime) -> None:
    assert isinstance(crt, SubprocessRuntime)

    async def kill(args: Any) -> Any:
        (run,) = crt._runs
        assert run.pid is not None
        os.kill(descendants(run.pid)[-1], signal.SIGKILL)  # the program's process
        await anyio.sleep(30)

    program = pick(crt, "await tools.kill()", "await tools.kill();")
    with anyio.fail_after(20):
        result = await run(crt, program, bindings={"tools.kill": kill})
    assert result.error is not None
    assert (result.error.kind, result.error.exit_status) == ("died", -signal.SIGKILL)


async def test_logs_arrive_in_order_and_stream_live(crt: CodeRuntime) -> None:
    program = pick(
        crt,
        "import sys\nprint('one')\nsys.stderr.write('two\\n')\nprint({'three': 3})",
        "console.log('one');\nconsole.error('two');\nconsole.warn({ three: 3 });",
    )
    result = await run(crt, program)
    assert result.logs == ["one", "two", pick(crt, "{'three': 3}", "{ three: 3 }")]
    seen: list[tuple[float, str]] = []
    program = pick(
        crt,
        "import time\nprint('before', flush=True)\ntime.sleep(60)",
        "console.log('before');\nawait new Promise((r) => setTimeout(r, 60_000));",
    )
    start = anyio.current_time()
    result = await run(
        crt,
        program,
        limits=Limits(max_wall_ms=1000),
        on_log=lambda line: seen.append((anyio.current_time() - start, line)),
    )
    assert result.logs == ["before"]  # survived the killed run
    assert [line for _, line in seen] == ["before"]
    assert seen[0][0] < 0.9  # it arrived while the program slept, not at the end


async def test_abort_mid_call_cancels_the_binding(crt: CodeRuntime) -> None:
    abort = anyio.Event()
    cancelled = anyio.Event()

    async def hang(args: Any) -> Any:
        abort.set()
        try:
            await anyio.sleep(60)
        finally:
            cancelled.set()

    program = pick(
        crt, "print('calling')\nawait tools.hang()", "console.log('calling');\nawait tools.hang();"
    )
    result = await run(crt, program, bindings={"tools.hang": hang}, abort=abort)
    assert result.error is not None and result.error.kind == "aborted"
    assert cancelled.is_set()
    assert result.logs == ["calling"]


async def test_calls_left_running_when_the_program_returns_are_cancelled(crt: CodeRuntime) -> None:
    cancelled = anyio.Event()

    async def hang(args: Any) -> Any:
        try:
            await anyio.sleep(60)
        finally:
            cancelled.set()

    program = pick(
        crt,
        "import asyncio\nt = asyncio.ensure_future(tools.hang())\nawait asyncio.sleep(0.2)\nreturn 1",
        "tools.hang().catch(() => {});\nawait new Promise((r) => setTimeout(r, 200));\nreturn 1;",
    )
    with anyio.fail_after(10):
        result = await run(crt, program, bindings={"tools.hang": hang})
    assert result.value == 1
    assert cancelled.is_set()


async def test_an_abort_set_before_the_run_starts_nothing(crt: CodeRuntime) -> None:
    abort = anyio.Event()
    abort.set()
    result = await run(crt, pick(crt, "return 1", "return 1;"), abort=abort)
    assert result.error is not None and result.error.kind == "aborted"


async def test_cancelling_the_caller_gives_aborted(crt: CodeRuntime) -> None:
    results: list[RunResult] = []
    program = pick(crt, "import time\ntime.sleep(60)", "while (true) {}")

    async def runner() -> None:
        results.append(await run(crt, program, limits=Limits(max_wall_ms=60_000)))

    async with anyio.create_task_group() as tg:
        tg.start_soon(runner)
        await anyio.sleep(0.3)
        tg.cancel_scope.cancel()
    assert results and results[0].error is not None and results[0].error.kind == "aborted"


@pytest.mark.parametrize("language", ["python", "typescript"])
async def test_aclose_aborts_runs_in_flight_and_later_runs_raise(language: str) -> None:
    results: list[RunResult] = []
    rt = TypeScriptRuntime() if language == "typescript" else SubprocessRuntime()
    program = pick(rt, "import time\ntime.sleep(60)", "await new Promise(() => {});")

    async def runner() -> None:
        results.append(await run(rt, program, limits=Limits(max_wall_ms=60_000)))

    async with anyio.create_task_group() as tg:
        for _ in range(3):
            tg.start_soon(runner)
        await anyio.sleep(1.0)
        await rt.aclose()
    assert [r.error.kind if r.error else None for r in results] == ["aborted"] * 3
    assert psutil.Process().children(recursive=True) == []
    with pytest.raises(RuntimeClosedError):
        await run(rt, "1")


async def test_runs_proceed_concurrently(crt: CodeRuntime) -> None:
    # Six runs meet at a barrier (a binding that returns once all six have called it): if the
    # runtime ran them one after another, the first would wait there forever.
    values: list[Any] = []
    arrived = 0
    everyone = anyio.Event()

    async def barrier(args: Any) -> Any:
        nonlocal arrived
        arrived += 1
        if arrived == 6:
            everyone.set()
        await everyone.wait()
        return args["i"]

    async def one(i: int) -> None:
        program = pick(
            crt, f"return await tools.barrier(i={i})", f"return await tools.barrier({{ i: {i} }});"
        )
        values.append((await run(crt, program, bindings={"tools.barrier": barrier})).value)

    with anyio.fail_after(60):
        async with anyio.create_task_group() as tg:
            for i in range(6):
                tg.start_soon(one, i)
    assert sorted(values) == list(range(6))


async def test_caller_mistakes_raise_clearly(crt: CodeRuntime) -> None:
    from runtime import RuntimeUsageError

    with pytest.raises(RuntimeUsageError, match="not a dotted identifier"):
        await crt.run(RunRequest(program="1", bindings={"1tools.add": _add}))
    with pytest.raises(RuntimeUsageError, match="not lossless JSON"):
        await crt.run(RunRequest(program="1", inputs={"x": (1, 2)}))


async def test_results_encode_to_the_documented_json_shape(crt: CodeRuntime) -> None:
    import msgspec

    result = await run(crt, pick(crt, "1/0", "null.x;"))
    shape = msgspec.json.decode(msgspec.json.encode(result.to_json()))
    assert set(shape) == {"logs", "error"}
    assert {"kind", "message", "exception_type", "traceback", "lineno"} == set(shape["error"])


async def test_garbage_and_forged_frames_are_dropped_and_counted(crt: CodeRuntime) -> None:
    # The bridge numbers calls 1, 2, ... as it writes them; the host takes only increasing
    # ids (a repeated or older id is forged), whatever else comes.
    from tests.host.sandbox.hostile import bridge_helpers

    forged = [
        "garbage",
        '{"type": "Nope"}',
        '{"type": "Call", "id": "x"}',
        '{"type": "Call", "id": 1, "name": "tools.add", "args": {"a": 1, "b": 1}}',
        '{"type": "Ready"}',
    ]
    if crt.language == "python":
        program = bridge_helpers() + "fd = CTL_OUT\nfirst = await tools.add(a=1, b=1)\n"
        program += "".join(f"send_raw(frame({f!r}.encode()))\n" for f in forged)
        program += "second = await tools.add(a=20, b=22)\nreturn first + second\n"
    else:
        program = (
            "process; // node's fs needs node's process made first\n"
            "const fs = await import('node:fs');\n"
            "const frame = (text: string) => { const body = new TextEncoder().encode(text);\n"
            "  const out = new Uint8Array(4 + body.length); new DataView(out.buffer).setUint32(0, body.length);\n"
            "  out.set(body, 4); fs.writeSync(1, out); };\n"
            "const first = await tools.add({ a: 1, b: 1 });\n"
            + "".join(f"frame({f!r});\n" for f in forged)
            + "const second = await tools.add({ a: 20, b: 22 });\nreturn first + second;\n"
        )
    result = await run(crt, program)
    assert result.value == 44, result.error
    assert result.stats is not None
    assert result.stats.dropped_frames == 5  # 3 undecodable, a repeated id, a second Ready
    assert result.stats.calls == 2
