"""Compiling programs: async body, the last-expression rule, and parse failures."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from runtime._program import ABSENT_NAME, LAST_NAME, ProgramRejected, compile_program, entry_point

_ABSENT = object()


def _run(source: str, **names: Any) -> Any:
    namespace: dict[str, Any] = {
        LAST_NAME: lambda v: _ABSENT if v is None else v,
        ABSENT_NAME: _ABSENT,
        "asyncio": asyncio,
        **names,
    }
    func = entry_point(compile_program(source), namespace)
    return asyncio.run(func())


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("1 + 1", 2),
        ("return None", None),
        ("return", None),
        ("x = 1", _ABSENT),
        ("print", print),
        ("None", _ABSENT),
        ("await asyncio.sleep(0)\nreturn 5", 5),
        ("def f():\n    return 3\nf()", 3),
        ("if True:\n    return 'early'\nreturn 'late'", "early"),
        ("", _ABSENT),
        ("xs = [1, 2]\n[x * 2 for x in xs]", [2, 4]),
    ],
)
def test_results_follow_the_last_expression_rule(source: str, expected: Any) -> None:
    assert _run(source) == expected if expected is not _ABSENT else _run(source) is _ABSENT


def test_a_trailing_expression_that_is_none_gives_no_result() -> None:
    assert _run("def f(): pass\nf()") is _ABSENT


@pytest.mark.parametrize(
    ("source", "lineno", "needle"),
    [
        ("x = 1\nfoo(", 2, "was never closed"),
        ("yield 1", 1, "`yield` is not allowed"),
        ("x = 1\nyield from []", 2, "`yield` is not allowed"),
        ("from __future__ import annotations", 1, "__future__"),
        ("nonlocal x", 1, "nonlocal"),
    ],
)
def test_parse_failures_name_the_program_line(source: str, lineno: int, needle: str) -> None:
    with pytest.raises(ProgramRejected) as info:
        compile_program(source)
    assert needle in info.value.message
    assert info.value.lineno == lineno


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
