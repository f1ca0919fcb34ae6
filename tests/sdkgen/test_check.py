"""Tests for check_program: ty diagnostics in program line numbers, rendering, errors."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

import sdkgen
from sdkgen._check import wrap_program
from tests.sdkgen.manifests import large, representative

pytestmark = pytest.mark.usefixtures("ty")

GOOD = """\
import asyncio

page = await tools.read_file(path="/x", limit=10)
if page["truncated"]:
    return None
mail = await tools.send_mail(**{"from": "a@b.c", "to": ["d@e.f"]})
got = await asyncio.gather(tools.import_(), tools.get_file(a=1))
try:
    await tools.tree(root={"name": "r"})
except ToolCallError as exc:
    print(exc.tool, exc.code, exc.message)
return [line["text"] for line in page["lines"]]
"""


def test_a_correct_program_has_no_diagnostics() -> None:
    started = time.perf_counter()
    assert sdkgen.check_program(GOOD, representative()) == []
    elapsed = time.perf_counter() - started
    assert elapsed < 10, f"check took {elapsed:.2f} s"


def test_errors_are_reported_in_program_lines_and_columns() -> None:
    program = 'x = 1\nawait tools.read_fil(path="a")\nawait tools.read_file(path=3)\n'
    found = sdkgen.check_program(program, representative())
    assert [(d.line, d.column, d.severity, d.rule) for d in found] == [
        (2, 7, "error", "missing-attribute"),
        (3, 23, "error", "invalid-argument-type"),
    ]
    assert "read_fil" in found[0].message
    assert "Expected `str`" in found[1].message


def test_large_manifest_checks() -> None:
    program = (
        'page = await tools.list_issue(owner="o", repo="r", state="shut")\n'
        'return [i["title"] for i in page["items"]]\n'
    )
    found = sdkgen.check_program(program, large())
    assert [(d.line, d.rule) for d in found] == [(1, "invalid-argument-type")]
    assert '"shut"' in found[0].message


def test_tab_indented_programs_map_columns() -> None:
    program = "for i in range(2):\n\tawait tools.nope()\n"
    found = sdkgen.check_program(program, representative())
    assert [(d.line, d.column, d.rule) for d in found] == [(2, 8, "missing-attribute")]


def test_syntax_errors_and_empty_programs() -> None:
    assert sdkgen.check_program("", representative()) == []
    assert sdkgen.check_program("# only a comment\n", representative()) == []
    found = sdkgen.check_program("x = 1\ny = (\n", representative())
    assert found
    assert all(d.line in (2, 3) for d in found)
    assert {d.rule for d in found} == {"invalid-syntax"}


def test_render_diagnostics() -> None:
    found = sdkgen.check_program("await tools.nope()\n", representative())
    text = sdkgen.render_diagnostics(found)
    assert text.startswith("1:7: error: Module `tools` has no member `nope` [missing-attribute]")
    assert sdkgen.render_diagnostics([]) == "no problems found"


def test_wrap_program_adds_two_lines() -> None:
    wrapped, indent = wrap_program("return 1")
    assert wrapped.splitlines()[2] == indent + "return 1"
    assert len(wrapped.splitlines()) == 3


def test_missing_checker_says_what_to_install(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(sys, "executable", str(tmp_path / "python"))
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(sdkgen.CheckerNotFound, match="pip install ty"):
        sdkgen.check_program("return 1", representative())


def test_inputs_are_declared_globals() -> None:
    program = 'return [row["id"] for row in data] + [limit + 1]\n'
    assert sdkgen.check_program(program, [], inputs=["data", "limit", "not a name"]) == []
    found = sdkgen.check_program(program, [], inputs=["data"])
    assert [(d.line, d.rule) for d in found] == [(1, "unresolved-reference")]


def test_a_checker_that_overruns_raises_checker_failed() -> None:
    with pytest.raises(sdkgen.CheckerFailed, match="did not finish"):
        sdkgen.check_program("return 1", large(), timeout=0.001)
