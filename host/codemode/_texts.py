"""What a model reads about code mode: the instructions, ``run_code``'s description and
parameters, in each language programs may be written in."""

from __future__ import annotations

from typing import Any

__all__ = (
    "INSTRUCTIONS",
    "LANGUAGES",
    "PERSISTENT_NOTE",
    "RUN_CODE_DESCRIPTION",
    "RUN_CODE_PARAMETERS",
    "SYNC_INSTRUCTIONS",
    "TYPESCRIPT_INSTRUCTIONS",
    "run_code_parameters",
)

INSTRUCTIONS = """\
To call tools, write one Python program and pass it to `run_code` as `code`.
The program runs as a Python script (`__name__ == "__main__"`); top-level `await` works,
and a top-level `return` gives its result: a JSON value (dict, list, str, int, float, bool,
None); `print` for logs. Call tools as `await tools.<name>(arg=value, ...)` with keyword
arguments, as declared below. Independent calls can run together:
`await asyncio.gather(tools.a(...), tools.b(...))` (`import asyncio` first). A failed call
raises `ToolCallError` (`.tool`, `.message`, `.code`); catch it to recover. Only the logs
and the returned value come back to you."""

#: The instructions when the program calls tools plainly (``call_style="sync"``).
SYNC_INSTRUCTIONS = """\
To call tools, write one Python program and pass it to `run_code` as `code`.
The program runs as a Python script (`__name__ == "__main__"`); a top-level `return` gives
its result: a JSON value (dict, list, str, int, float, bool, None); `print` for logs. Call
tools as plain functions, `tools.<name>(arg=value, ...)`, with keyword arguments, as
declared below (no `await`: each call returns its result; calls from threads run
together). A failed call raises `ToolCallError` (`.tool`, `.message`, `.code`); catch it to
recover. Only the logs and the returned value come back to you."""

#: The instructions when programs are TypeScript (a runtime whose ``language`` says so).
TYPESCRIPT_INSTRUCTIONS = """\
To call tools, write one TypeScript program and pass it to `run_code` as `code`.
The program is the body of an async function: top-level `await` works, and `return` gives
its result: a JSON value (object, array, string, number, boolean, null; an integer past
2^53 as a bigint); `console.log` for logs. Call tools as `await tools.<name>({ arg: value })`
with one object of arguments, as declared below (`tools["a-b"]({...})` where a name is not
an identifier). Independent calls can run together: `await Promise.all([tools.a({...}),
tools.b({...})])`. A failed call throws `ToolCallError` (`.tool`, `.message`, `.code`); catch
it to recover. There is no file system, network or `Deno` namespace; only the logs and the
returned value come back to you."""

#: What the SDK section adds when programs run in a session.
PERSISTENT_NOTE = (
    "Variables, functions, classes and imports persist from one `run_code` call to the "
    "next (each call still runs in a fresh process); names that cannot be carried (open "
    "files, sockets, generators) are dropped and named in the result."
)

RUN_CODE_DESCRIPTION = (
    "Run a Python program that calls the tools described in the tools SDK section, in a "
    "fresh sandboxed process. Returns {logs, result?}."
)


def run_code_parameters(language: str) -> dict[str, Any]:
    """``run_code``'s JSON Schema for programs in ``language`` ("Python", "TypeScript")."""
    return {
        "type": "object",
        "properties": {"code": {"type": "string", "description": f"the {language} program"}},
        "required": ["code"],
        "additionalProperties": False,
    }


RUN_CODE_PARAMETERS = run_code_parameters("Python")
#: Each language's name as a model reads it.
LANGUAGES = {"python": "Python", "typescript": "TypeScript"}
