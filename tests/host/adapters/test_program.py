"""The program text adapters run: the last expression kept, line numbers kept, values as JSON."""

from __future__ import annotations

import ast
import math
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from host.adapters._program import _keep_last_expression, build_program, jsonable, unshift
from runtime.lowlevel import json_problem

_leaves = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(),
    st.text(),
    st.binary(),
    st.sets(st.integers(), max_size=3),
    st.complex_numbers(allow_nan=False),
)
_values = st.recursive(
    _leaves,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.tuples(inner, inner),
        st.dictionaries(st.one_of(st.text(), st.integers()), inner, max_size=4),
    ),
    max_leaves=20,
)


@given(_values)
def test_jsonable_always_gives_lossless_json_and_keeps_json_as_it_is(value: Any) -> None:
    out = jsonable(value)
    assert json_problem(out) is None
    if json_problem(value) is None:
        assert out is value


def test_jsonable_turns_what_json_cannot_say_into_text() -> None:
    assert jsonable((1, {"a": (2, 3)})) == [1, {"a": [2, 3]}]
    assert jsonable(math.nan) == "nan"
    assert jsonable({1: "x"}) == "{1: 'x'}"
    assert jsonable(b"ab") == "b'ab'"


@given(
    st.lists(
        st.sampled_from(["x = 1", "print(x)", "y = [\n    x,\n]", "if x:\n    x += 1", "é = 'ü'"]),
        max_size=5,
    ),
    st.sampled_from(["x", "(x,\n 2)", "f'{x}'", "x; x", "é"]),
)
def test_the_last_expression_is_kept_on_its_own_lines(lines: list[str], last: str) -> None:
    code = "\n".join([*lines, last])
    out = _keep_last_expression(code)
    tree = ast.parse(out)
    *body, kept = tree.body
    assert isinstance(kept, ast.Expr)  # _dsh_output(globals().pop('_dsh_last'))
    assigned = body[-1]
    assert isinstance(assigned, ast.Assign)
    assert ast.unparse(assigned.targets[0]) == "_dsh_last"
    original = ast.parse(code).body[-1]
    assert (assigned.lineno, assigned.end_lineno) == (original.lineno, original.end_lineno)
    assert ast.unparse(assigned.value) == ast.unparse(original.value)  # type: ignore[attr-defined]


def test_code_that_does_not_parse_or_ends_otherwise_is_left_alone() -> None:
    assert _keep_last_expression("def (") == "def ("
    assert _keep_last_expression("for x in y:\n    z") == "for x in y:\n    z"
    assert _keep_last_expression("x: int") == "x: int"


def test_an_assignment_is_kept_by_reading_its_target_again_on_a_line_of_its_own() -> None:
    assert _keep_last_expression("x = 1") == "x = 1\n_dsh_output((x))\n"
    assert _keep_last_expression("a, *b = c = f()") == "a, *b = c = f()\n_dsh_output(((a, *b)))\n"
    assert _keep_last_expression("d['k'] += 1\n") == "d['k'] += 1\n_dsh_output((d['k']))\n"


def test_a_traceback_is_shown_without_the_insertion_and_with_its_carets_in_place() -> None:
    program = build_program("y = 1; (y +\n  f(1/0))", None)
    assert program.inserted_at == (2, 7)
    assert program.text.splitlines()[1] == "y = 1; _dsh_last = (y +"
    traceback = (
        "Traceback (most recent call last):\n"
        '  File "<program>", line 2, in <module>\n'
        "    y = 1; _dsh_last = (y +\n"
        "                       ~~~~\n"
        '  File "<prelude>", line 30, in tool\n'
        "ZeroDivisionError: _dsh_tools.f: division by zero (TOOL_ERROR)"
    )
    assert program.shown(traceback) == (
        "Traceback (most recent call last):\n"
        '  File "<program>", line 1, in <module>\n'
        "    y = 1; (y +\n"
        "           ~~~~\n"
        "ZeroDivisionError: f: division by zero (TOOL_ERROR)"
    )


def test_the_prelude_takes_one_line_and_unshift_gives_it_back() -> None:
    program = build_program("a\nb", None).text
    assert program.splitlines()[1:3] == ["a", "_dsh_last = b"]
    text = 'File "<program>", line 3, in <module>\n(line 2)\nline 4: x'
    assert unshift(text) == 'File "<program>", line 2, in <module>\n(line 1)\nline 3: x'


def test_unshift_gives_the_kept_expression_its_own_line_back() -> None:
    traceback = (
        'File "<program>", line 3, in <module>\n'
        "    _dsh_last = lookup('tau')\n"
        "                ^^^^^^^^^^^^^\n"
        "ToolCallError: lookup: no such key (TOOL_ERROR)"
    )
    # As Python shows it: the line as written, no carets when they would span all of it.
    assert unshift(traceback) == (
        'File "<program>", line 2, in <module>\n'
        "    lookup('tau')\n"
        "ToolCallError: lookup: no such key (TOOL_ERROR)"
    )
    part = "    _dsh_last = 1 + f(x)\n                    ^^^^\nZeroDivisionError"
    assert unshift(part) == "    1 + f(x)\n        ^^^^\nZeroDivisionError"
