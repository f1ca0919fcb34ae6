"""Tests for check_typescript: Deno's checker on a program against the TypeScript SDK."""

from __future__ import annotations

import pytest

import sdkgen
from host.sandbox import deno_binary

MANIFEST = [
    {
        "name": "add",
        "description": "Add two integers.",
        "parameters": {
            "type": "object",
            "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
            "required": ["a", "b"],
        },
        "output": {"type": "integer"},
    },
    {"name": "say-hi", "description": "Greet.", "parameters": {"type": "object"}},
]


def test_a_program_that_types_has_no_diagnostics() -> None:
    program = (
        "enum E { A }\nconst n: number = await tools.add({ a: 1, b: E.A });\n"
        "await tools['say-hi']({});\ntry { await tools.add({ a: 1, b: 2 }); }\n"
        "catch (e) { if (e instanceof ToolCallError) console.log(e.code); }\n"
        "return n + limit;"
    )
    assert sdkgen.check_typescript(program, MANIFEST, deno=deno_binary(), inputs=["limit"]) == []


def test_diagnostics_are_in_program_lines_and_columns() -> None:
    program = "const x = 1;\nconst s: string = await tools.add({ a: 1, b: 'two' });\ntools.nope();"
    found = sdkgen.check_typescript(program, MANIFEST, deno=deno_binary())
    assert [(d.line, d.column, d.rule, d.severity) for d in found] == [
        (2, 7, "TS2322", "error"),
        (2, 43, "TS2322", "error"),
        (3, 7, "TS2339", "error"),
    ]
    text = sdkgen.render_diagnostics(found, "prog.ts")
    assert text.splitlines()[2].startswith("prog.ts:3:7: error: Property 'nope' does not exist")


def test_a_missing_deno_is_checker_not_found() -> None:
    with pytest.raises(sdkgen.CheckerNotFound):
        sdkgen.check_typescript("return 1;", MANIFEST, deno="/nonexistent/deno")
