"""``dsh-code check``: type-check a program against the bindings' SDK, as a compiler reports.

One line per finding, ``FILE:LINE:COL: error: message [rule]`` (``<stdin>`` for ``-``), and at
a terminal the program's line under it with a caret at the column; ``FILE: no problems found``
when there is nothing to say. Exit 1 on an error, else 0.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from host.cli._errors import EXIT_FAILED, EXIT_OK, UsageFailure
from host.cli._mcp import (
    MCP_START_TIMEOUT_MS,
    McpConfigOption,
    McpOption,
    McpStartTimeoutOption,
)
from host.cli._options import BindingsOption, CallStyleOption, LangOption
from host.cli._output import (
    for_terminal,
    is_terminal,
    result_stream,
    stdout_to_stderr,
    write_result,
)
from host.cli._setup import (
    CALL_STYLES,
    check_choice,
    check_typescript_flags,
    language_of,
    load_tools,
    make_registry,
    mcp_tools,
    read_program,
)

if TYPE_CHECKING:
    from sdkgen import Diagnostic

__all__ = ("check_command", "render_findings")

#: A code frame shows at most this much of a line (a long line is cut around the column).
_FRAME_WIDTH = 120


def check_command(
    program: Annotated[
        str, typer.Argument(metavar="PROGRAM", help="The program file, or - for standard input.")
    ],
    bindings: BindingsOption = [],  # noqa: B006 - typer reads the default, never mutates it
    mcp: McpOption = [],  # noqa: B006
    mcp_config: McpConfigOption = None,
    mcp_start_timeout_ms: McpStartTimeoutOption = MCP_START_TIMEOUT_MS,
    call_style: CallStyleOption = "async",
    lang: LangOption = None,
) -> None:
    """Type-check PROGRAM against the bindings' SDK without running it (exit 1 on errors)."""
    import sdkgen

    check_choice("--call-style", call_style, CALL_STYLES)
    language = language_of(lang, program)
    check_typescript_flags(language, call_style=call_style)
    with stdout_to_stderr():
        source = read_program(program)
        loaded = load_tools(bindings)
        manifest = make_registry(
            loaded, None, mcp_tools(mcp, mcp_config, mcp_start_timeout_ms)
        ).manifest()
    try:
        if language == "typescript":
            from host.sandbox import deno_binary

            diagnostics = sdkgen.check_typescript(source, manifest, deno=deno_binary())
        else:
            diagnostics = sdkgen.check_program(source, manifest, call_style=call_style)
    except sdkgen.SdkgenError as exc:
        raise UsageFailure(str(exc)) from None
    name = "<stdin>" if program == "-" else program
    frames = is_terminal(result_stream())
    write_result(render_findings(name, source, diagnostics, frames=frames) + "\n")
    errors = [d for d in diagnostics if d.severity == "error"]
    raise typer.Exit(EXIT_FAILED if errors else EXIT_OK)


def render_findings(
    name: str, source: str, diagnostics: list[Diagnostic], *, frames: bool = False
) -> str:
    """The findings as compiler lines (each with a code frame when ``frames``)."""
    if not diagnostics:
        return f"{name}: no problems found"
    lines = source.splitlines()
    out: list[str] = []
    for d in diagnostics:
        out.append(f"{name}:{d.line}:{d.column}: {d.severity}: {d.message} [{d.rule}]")
        if frames and 1 <= d.line <= len(lines):
            out.extend(_frame(d.line, d.column, lines[d.line - 1]))
    return "\n".join(out)


def _frame(number: int, column: int, line: str) -> list[str]:
    """The line, numbered, and a caret under ``column`` (1-based); tabs kept aligned."""
    start = max(0, column - 1 - _FRAME_WIDTH // 2) if len(line) > _FRAME_WIDTH else 0
    shown = line[start : start + _FRAME_WIDTH]
    before = shown[: max(column - 1 - start, 0)]
    pad = "".join("\t" if ch == "\t" else " " for ch in before)
    gutter = str(number)
    return [
        f" {gutter} | {for_terminal(shown)}",
        f" {' ' * len(gutter)} | {pad}^",
    ]
