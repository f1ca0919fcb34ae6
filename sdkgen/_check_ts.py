"""Type-check a TypeScript program against the generated SDK with Deno's checker, in program lines."""

from __future__ import annotations

import os
import re
import subprocess
import tempfile
from collections.abc import Iterable
from pathlib import Path

from sdkgen._check import Diagnostic, Severity
from sdkgen._exceptions import CheckerFailed, CheckerNotFound
from sdkgen._ir import build_sdk
from sdkgen._manifest import Manifest
from sdkgen._names import is_ts_name
from sdkgen._typescript import emit_typescript

__all__ = ("check_typescript",)

_SDK_FILE = "sdk.d.ts"
_PROGRAM_FILE = "program.ts"
#: Above the program: the SDK's declarations, then the async function it is the body of.
_HEAD = (f'/// <reference path="./{_SDK_FILE}" />', "async function __dsh_program() {")
_HEADER = re.compile(r"^(?P<rule>TS\d+) \[(?P<sev>ERROR|WARNING|INFO)\]: (?P<msg>.*)$")
_AT = re.compile(r"^\s+at (?P<file>.+):(?P<line>\d+):(?P<col>\d+)$")
_TAKEN = frozenset({"tools", "ToolCallError", "JsonValue"})


def check_typescript(
    program: str,
    manifest: Manifest,
    *,
    deno: str,
    inputs: Iterable[str] = (),
    timeout: float = 60.0,
) -> list[Diagnostic]:
    """Type-check a TypeScript program (the body of an async function) against the
    manifest's TypeScript SDK with ``deno check`` (``deno``: its binary), strict; returns
    the diagnostics in the program's own lines and columns, sorted. ``inputs`` are the run's
    input globals (typed ``any``). Raises CheckerNotFound when ``deno`` cannot be run,
    CheckerFailed when it fails otherwise or runs past timeout seconds."""
    if not os.access(deno, os.X_OK):
        raise CheckerNotFound(f"check_typescript needs Deno: {deno} cannot be run")
    names = sorted({n for n in inputs if is_ts_name(n) and n not in _TAKEN})
    declared = "".join(f"declare const {name}: any;\n" for name in names)
    sdk = emit_typescript(build_sdk(manifest)) + declared
    source = program.replace("\r\n", "\n").replace("\r", "\n")
    with tempfile.TemporaryDirectory(prefix="sdkgen-check-ts-") as tmp:
        root = Path(tmp)
        (root / _SDK_FILE).write_text(sdk, encoding="utf-8")
        (root / _PROGRAM_FILE).write_text("\n".join([*_HEAD, source, "}"]) + "\n", "utf-8")
        output = _run(deno, root, timeout)
    return _parse(output, source.count("\n") + 1)


def _run(deno: str, root: Path, timeout: float) -> str:
    command = [
        deno,
        "check",
        "--quiet",
        "--no-config",
        "--no-lock",
        "--no-remote",
        "--no-npm",
        _PROGRAM_FILE,
    ]
    env = {**os.environ, "NO_COLOR": "1"}
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
            env=env,
        )
    except subprocess.TimeoutExpired as exc:
        raise CheckerFailed(f"deno check did not finish within {timeout} s") from exc
    except OSError as exc:
        raise CheckerNotFound(f"deno could not be started: {exc}") from exc
    output = done.stdout + done.stderr
    # 1 with diagnostics is a finding; anything else without them is the checker's failure
    if done.returncode != 0 and not any(_HEADER.match(line) for line in output.splitlines()):
        raise CheckerFailed(f"deno check exited with status {done.returncode}: {output[-2000:]}")
    return output


def _parse(output: str, last_line: int) -> list[Diagnostic]:
    found: set[Diagnostic] = set()
    header: re.Match[str] | None = None
    for raw in output.splitlines():
        match = _HEADER.match(raw)
        if match is not None:
            header = match
            continue
        where = _AT.match(raw)
        if header is None or where is None:
            continue
        if Path(where["file"]).name == _PROGRAM_FILE:
            line = min(max(int(where["line"]) - len(_HEAD), 1), last_line)
            severity: Severity = "error" if header["sev"] == "ERROR" else "warning"
            found.add(Diagnostic(line, int(where["col"]), header["msg"], severity, header["rule"]))
        header = None  # the first place is the diagnostic's; the rest are related information
    return sorted(found, key=lambda d: (d.line, d.column, d.severity, d.rule, d.message))
