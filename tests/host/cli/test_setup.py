"""Reading a program: decoded as ``python prog.py`` decodes it, the same from a file and stdin."""

from __future__ import annotations

import subprocess
from pathlib import Path

from tests.host.cli.support import cli, env

LATIN_1 = b'# -*- coding: latin-1 -*-\nreturn "caf\xe9"\n'
NOT_UTF_8 = b'return "caf\xe9"\n'


def _run_both_ways(tmp_path: Path, data: bytes) -> list[tuple[int, str, str]]:
    program = tmp_path / "prog.py"
    program.write_bytes(data)
    seen = []
    for args, stdin in ((["run", str(program)], b""), (["run", "-"], data)):
        done = subprocess.run(
            cli(*args, "--json"),
            input=stdin,
            capture_output=True,
            env=env(),
            timeout=60,
            check=False,
        )
        seen.append((done.returncode, done.stdout.decode(), done.stderr.decode()))
    return seen


def test_a_coding_line_is_honoured_from_a_file_and_from_stdin(tmp_path: Path) -> None:
    from_file, from_stdin = _run_both_ways(tmp_path, LATIN_1)
    assert from_file == from_stdin == (0, '{"value": "café", "logs": []}\n', "")


def test_a_program_that_is_not_utf_8_is_the_same_usage_error_both_ways(tmp_path: Path) -> None:
    from_file, from_stdin = _run_both_ways(tmp_path, NOT_UTF_8)
    message = (
        "line 1: byte 0xe9 is not utf-8: save it as UTF-8, or declare its encoding on its "
        "first or second line (PEP 263: # -*- coding: latin-1 -*-)"
    )
    program = tmp_path / "prog.py"
    assert from_file[0] == from_stdin[0] == 2
    assert f'"message": "{program}: {message}"' in from_file[1]
    assert f'"message": "<stdin>: {message}"' in from_stdin[1]


def test_a_utf_8_bom_is_dropped_both_ways(tmp_path: Path) -> None:
    from_file, from_stdin = _run_both_ways(tmp_path, b"\xef\xbb\xbfreturn 'ok'\n")
    assert from_file == from_stdin == (0, '{"value": "ok", "logs": []}\n', "")
