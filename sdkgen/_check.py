"""Type-check a program against the generated Python SDK with `ty`, in program line numbers."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from sdkgen._exceptions import CheckerFailed, CheckerNotFound
from sdkgen._ir import build_sdk
from sdkgen._manifest import Manifest
from sdkgen._names import is_py_name
from sdkgen._python import emit_python

Severity = Literal["error", "warning", "info"]

_SDK_MODULE = "tools"  # so the checker says "Module `tools` has no member ..."
_INPUTS_MODULE = "dsh_inputs"
_TAKEN = frozenset({"tools", "ToolCallError", "JsonValue", "Any"})
_PROGRAM_FILE = "program.py"
_LINE = re.compile(
    r"^(?P<file>[^:\n]+):(?P<line>\d+):(?P<col>\d+): (?P<sev>error|warning|info)"
    r"\[(?P<rule>[\w-]+)\] (?P<msg>.*)$"
)


@dataclass(frozen=True, slots=True)
class Diagnostic:
    """One finding of the checker, at a 1-based line and column of the program."""

    line: int
    column: int
    message: str
    severity: Severity
    rule: str


def check_program(
    program: str,
    manifest: Manifest,
    *,
    inputs: Iterable[str] = (),
    timeout: float = 30.0,
    call_style: str = "async",
) -> list[Diagnostic]:
    """Type-check a program (the body of an async function) against the manifest's SDK.

    Runs the `ty` checker (package `ty`; install with `pip install 'dsh-code[check]'`) on
    the program wrapped as `async def` after importing `tools`, `ToolCallError` and the SDK
    types, plus the run's input globals named in inputs (typed `Any`); returns its
    diagnostics in the program's own line and column numbers, sorted. ``call_style``
    "sync" checks plain (not awaited) calls. Raises
    CheckerNotFound when `ty` is missing, CheckerFailed when it crashes or runs past
    timeout seconds, ManifestError for an unreadable manifest.
    """
    checker = find_checker()
    built = build_sdk(manifest)
    sdk = emit_python(built, call_style)
    wrapped, indent = wrap_program(program, [t.name for t in built.types])
    names = sorted({name for name in inputs if is_py_name(name) and name not in _TAKEN})
    declared = "".join(f"{name}: Any\n" for name in names)
    with tempfile.TemporaryDirectory(prefix="sdkgen-check-") as tmp:
        root = Path(tmp)
        (root / f"{_SDK_MODULE}.pyi").write_text(sdk, encoding="utf-8")
        inputs_stub = f"from typing import Any\n\n{declared}"
        (root / f"{_INPUTS_MODULE}.pyi").write_text(inputs_stub, encoding="utf-8")
        (root / _PROGRAM_FILE).write_text(wrapped, encoding="utf-8")
        (root / "ty.toml").write_text("", encoding="utf-8")  # no settings from outside
        output = _run(checker, root, timeout)
    return _parse(output, len(indent), program.count("\n") + 1)


def find_checker() -> str:
    """Return the path of the `ty` executable beside this Python, or on PATH."""
    search = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])
    found = shutil.which("ty", path=search)
    if found is None:
        raise CheckerNotFound(
            "check_program needs the `ty` type checker: pip install ty "
            "(or pip install 'dsh-code[check]')"
        )
    return found


def wrap_program(program: str, types: Iterable[str] = ()) -> tuple[str, str]:
    """Wrap a program as the body of `async def`; return the text and the indent used.

    The SDK module is imported as `tools`, with its `types`, `ToolCallError` and `JsonValue`
    as globals (not its functions: a tool named `print` must not hide the builtin). The
    wrapper adds exactly two lines above the program, so program line N is line N+2.
    """
    lines = program.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    uses_tabs = any(line[: len(line) - len(line.lstrip())].count("\t") for line in lines)
    indent = "\t" if uses_tabs else "    "
    body = [indent + line if line.strip() else line for line in lines]
    if not any(line.strip() and not line.lstrip().startswith("#") for line in lines):
        body.append(indent + "pass")
    names = ", ".join(["JsonValue", "ToolCallError", *sorted(set(types))])
    head = [
        f"import {_SDK_MODULE}; from {_SDK_MODULE} import {names}; "
        f"from {_INPUTS_MODULE} import *  # noqa",
        "async def __program__():  # noqa",
    ]
    return "\n".join([*head, *body]) + "\n", indent


def _run(checker: str, root: Path, timeout: float) -> str:
    command = [
        checker,
        "check",
        "--output-format=concise",
        "--python-version=3.11",
        "--python-platform=linux",
        "--color=never",
        "--no-progress",
        "--project",
        str(root),
        "--config-file",
        str(root / "ty.toml"),
        _PROGRAM_FILE,
    ]
    try:
        done = subprocess.run(
            command,
            cwd=root,
            capture_output=True,
            text=True,
            encoding="utf-8",
            errors="replace",
            timeout=timeout,
            check=False,
            stdin=subprocess.DEVNULL,
        )
    except subprocess.TimeoutExpired as exc:
        raise CheckerFailed(f"ty did not finish within {timeout} s") from exc
    except OSError as exc:
        raise CheckerFailed(f"ty could not be started: {exc}") from exc
    if done.returncode not in (0, 1):
        detail = (done.stderr or done.stdout).strip()
        raise CheckerFailed(f"ty exited with status {done.returncode}: {detail[-2000:]}")
    return done.stdout


def _parse(output: str, indent: int, last_line: int) -> list[Diagnostic]:
    found: set[Diagnostic] = set()
    for raw in output.splitlines():
        match = _LINE.match(raw.strip())
        if match is None or Path(match["file"]).name != _PROGRAM_FILE:
            continue
        line = min(max(int(match["line"]) - 2, 1), last_line)
        column = max(int(match["col"]) - (indent if int(match["line"]) > 2 else 0), 1)
        severity: Severity = match["sev"]  # type: ignore[assignment]
        found.add(Diagnostic(line, column, match["msg"], severity, match["rule"]))
    return sorted(found, key=lambda d: (d.line, d.column, d.severity, d.rule, d.message))


def render_diagnostics(diagnostics: list[Diagnostic], file_name: str | None = None) -> str:
    """Render diagnostics one per line as `line:col: severity: message [rule]`, each line
    after `file_name:` when it is given."""
    if not diagnostics:
        return "no problems found"
    prefix = f"{file_name}:" if file_name else ""
    return "\n".join(
        f"{prefix}{d.line}:{d.column}: {d.severity}: {d.message} [{d.rule}]" for d in diagnostics
    )
