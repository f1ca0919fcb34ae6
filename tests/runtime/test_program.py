"""Compiling and running programs as modules: top-level return and await, the last-expression
rule, and parse failures."""

from __future__ import annotations

import asyncio
import threading
import time
import types
from typing import Any

import pytest

from runtime._program import (
    ABSENT,
    Bare,
    ProgramRejected,
    compile_program,
    install_helpers,
    is_async,
    run_async,
    run_sync,
)

install_helpers()


def _module() -> dict[str, Any]:
    namespace = types.ModuleType("__main__").__dict__
    namespace["asyncio"] = asyncio
    return namespace


def _outcome(source: str) -> Any:
    code = compile_program(source)
    if is_async(code):
        return asyncio.run(run_async(code, _module()))
    return run_sync(code, _module())


def _run(source: str) -> Any:
    value = _outcome(source)
    return value.value if isinstance(value, Bare) else value


@pytest.mark.parametrize("source", ["{1, 2}", "x = 1\nx", "await asyncio.sleep(0, 'x')"])
def test_a_trailing_bare_expression_is_marked_as_such(source: str) -> None:
    assert isinstance(_outcome(source), Bare)


@pytest.mark.parametrize("source", ["return {1, 2}", "return 1", "x = 1", "None"])
def test_a_return_or_no_value_is_not_marked(source: str) -> None:
    assert not isinstance(_outcome(source), Bare)


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("1 + 1", 2),
        ("return None", None),
        ("return", None),
        ("x = 1", ABSENT),
        ("print", print),
        ("None", ABSENT),
        ("await asyncio.sleep(0)\nreturn 5", 5),
        ("await asyncio.sleep(0)\n5", 5),
        ("def f():\n    return 3\nf()", 3),
        ("if True:\n    return 'early'\nreturn 'late'", "early"),
        ("for i in range(10):\n    if i == 3:\n        return i", 3),
        ("while True:\n    return 'out'", "out"),
        ("", ABSENT),
        ("xs = [1, 2]\n[x * 2 for x in xs]", [2, 4]),
        ("match 3:\n    case 3:\n        return 'three'", "three"),
    ],
)
def test_results_follow_the_last_expression_rule(source: str, expected: Any) -> None:
    assert _run(source) == expected if expected is not ABSENT else _run(source) is ABSENT


def test_a_trailing_expression_that_is_none_gives_no_result() -> None:
    assert _run("def f(): pass\nf()") is ABSENT


def test_a_return_inside_try_is_not_caught_by_a_bare_except_and_runs_finally() -> None:
    source = (
        "log = []\n"
        "try:\n"
        "    try:\n        return log\n    except BaseException:\n        log.append('caught')\n"
        "except:\n    log.append('caught too')\n"
        "finally:\n    log.append('finally')\n"
    )
    assert _run(source) == ["finally"]


def test_a_return_inside_with_exits_the_manager_cleanly() -> None:
    source = (
        "class M:\n"
        "    def __init__(self):\n        self.seen = None\n"
        "    def __enter__(self):\n        return self\n"
        "    def __exit__(self, *exc):\n        self.seen = exc\n        return True\n"
        "m = M()\n"
        "with m as same:\n    return [same is m, m]\n"
    )
    same, manager = _run(source)
    assert same is True
    assert manager.seen == (None, None, None)  # as a function's return would leave it


def test_a_return_inside_async_with_exits_the_manager_cleanly() -> None:
    source = (
        "class M:\n"
        "    async def __aenter__(self):\n        return self\n"
        "    async def __aexit__(self, *exc):\n        self.seen = exc\n"
        "async with M() as m:\n    return m\n"
    )
    assert _run(source).seen == (None, None, None)


def test_a_with_without_return_is_untouched() -> None:
    code = compile_program("import contextlib\nwith contextlib.nullcontext(1) as x:\n    y = x\ny")
    assert "__dsh_returning__" not in code.co_names
    assert _run("import contextlib\nwith contextlib.nullcontext(1) as x:\n    y = x\ny") == 1


def test_a_non_manager_in_with_fails_as_in_cpython() -> None:
    with pytest.raises(TypeError, match="'int' object does not support the context manager"):
        _run("with 3:\n    return 1")


def test_a_return_in_except_star_is_the_result() -> None:
    source = "try:\n    return 'r'\nexcept* ValueError:\n    pass\n"
    assert _run(source) == "r"


@pytest.mark.parametrize(
    ("source", "lineno", "needle", "kind"),
    [
        ("x = 1\nfoo(", 2, "was never closed", "SyntaxError"),
        ("yield 1", 1, "'yield' outside function", "SyntaxError"),
        ("x = 1\nyield from []", 2, "'yield' outside function", "SyntaxError"),
        ("nonlocal x", 1, "nonlocal declaration not allowed at module level", "SyntaxError"),
        ("if True:\nx = 1", 2, "expected an indented block", "IndentationError"),
        ("class A:\n    return 1", 2, "'return' outside function", "SyntaxError"),
    ],
)
def test_parse_failures_name_the_program_line_and_kind(
    source: str, lineno: int, needle: str, kind: str
) -> None:
    with pytest.raises(ProgramRejected) as info:
        compile_program(source)
    assert needle in info.value.message
    assert info.value.message.startswith(f"{kind}: ")
    assert info.value.lineno == lineno
    assert info.value.exception_type == kind


def test_from_future_and_a_bom_are_accepted() -> None:
    assert (
        _run("\ufefffrom __future__ import annotations\ndef f(x: Undefined) -> 1: return x\nf(2)")
        == 2
    )


def test_yield_inside_a_nested_function_is_fine() -> None:
    assert _run("def gen():\n    yield 1\n    yield 2\nlist(gen())") == [1, 2]


def test_tracebacks_carry_program_line_numbers() -> None:
    with pytest.raises(ZeroDivisionError) as info:
        _run("x = 1\ny = 2\nx / 0")
    frames = [f for f in info.traceback if f.frame.code.raw.co_filename == "<program>"]
    assert [f.lineno + 1 for f in frames] == [3]
    assert frames[0].frame.code.raw.co_name == "<module>"


def test_an_unknown_policy_is_a_caller_error() -> None:
    with pytest.raises(ValueError, match="unknown policy"):
        compile_program("1", "lenient")  # type: ignore[arg-type]


def test_compiles_take_turns_across_threads(monkeypatch: pytest.MonkeyPatch) -> None:
    # CPython 3.11's AST constructor counts its recursion per interpreter: two threads
    # building ASTs at once can fail one with a spurious SystemError. Ours never overlap.
    import runtime._program as program

    inside, most = [0], [0]
    parse = program._parse

    def slow_parse(source: str) -> Any:
        inside[0] += 1
        most[0] = max(most[0], inside[0])
        time.sleep(0.002)  # lets the other threads in, were there no turns
        try:
            return parse(source)
        finally:
            inside[0] -= 1

    monkeypatch.setattr(program, "_parse", slow_parse)
    threads = [
        threading.Thread(target=lambda: [program.compile_program("1 + 1") for _ in range(5)])
        for _ in range(4)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert most[0] == 1


def test_a_spurious_ast_recursion_mismatch_is_tried_once_more(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import runtime._program as program

    failures = ["AST constructor recursion depth mismatch (before=159, after=210)"]
    parse = program._parse

    def racing_parse(source: str) -> Any:
        if failures:
            raise SystemError(failures.pop())
        return parse(source)

    monkeypatch.setattr(program, "_parse", racing_parse)
    assert isinstance(program.compile_program("1 + 1"), types.CodeType)
    monkeypatch.setattr(program, "_parse", lambda source: (_ for _ in ()).throw(SystemError("x")))
    with pytest.raises(SystemError):
        program.compile_program("1 + 1")  # any other SystemError is not ours to hide
