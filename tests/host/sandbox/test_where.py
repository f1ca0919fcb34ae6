"""Where a program was at its budget: the program's frames from a hostile stack dump."""

from __future__ import annotations

import fcntl
import os

from hypothesis import given
from hypothesis import strategies as st

from host.sandbox._where import MAX_DUMP_BYTES, program_location, read_dump

PROGRAM = "def spin():\n    while True:\n        pass\n\nspin()\n"

DUMP = b"""Thread 0x00007f0000000001 (most recent call first):
  File "/usr/lib/python3.11/threading.py", line 320 in wait
  File "/x/runtime/_bridge.py", line 90 in _read

Current thread 0x00007f0000000002 (most recent call first):
  File "<program>", line 3 in spin
  File "<program>", line 5 in <module>
  File "/x/runtime/_program.py", line 310 in run_sync
"""


def test_the_programs_frames_of_the_thread_that_took_the_signal() -> None:
    assert program_location(DUMP, PROGRAM) == (
        '  File "<program>", line 5, in <module>\n'
        "    spin()\n"
        '  File "<program>", line 3, in spin\n'
        "    pass",
        3,
    )


def test_only_the_innermost_few_frames_are_shown_and_names_are_bounded() -> None:
    frames = "".join(f'  File "<program>", line {n} in f{n}\n' for n in range(1, 40))
    text, lineno = program_location(f"Stack (most recent call first):\n{frames}".encode(), "") or (
        "",
        0,
    )
    assert lineno == 1 and text.count("File") == 3 and "in f3" in text and "in f4" not in text
    long_name = b'Stack (most recent call first):\n  File "<program>", line 1 in ' + b"n" * 500
    shown = program_location(long_name, "x = 1\n")
    assert shown is not None and len(shown[0]) < 200 and shown[0].endswith("…\n    x = 1")


def test_no_frame_of_the_program_is_no_location() -> None:
    assert program_location(DUMP.split(b"\n\n")[0], PROGRAM) is None
    assert program_location(b"", PROGRAM) is None


@given(st.binary(max_size=2000))
def test_any_bytes_give_a_location_or_none(dump: bytes) -> None:
    found = program_location(dump, PROGRAM)
    assert found is None or (found[0].startswith('  File "<program>"') and found[1] > 0)


def test_a_dump_is_read_bounded() -> None:
    read, write = os.pipe()
    try:
        fcntl.fcntl(write, fcntl.F_SETPIPE_SZ, 1 << 20)  # room for more than the bound
        os.set_blocking(read, False)
        os.write(write, b"x" * 60_000 + b"y" * 10_000)
        data = read_dump(read)
        assert len(data) == MAX_DUMP_BYTES and data.endswith(b"y" * (MAX_DUMP_BYTES - 60_000))
        assert read_dump(read) == b"y" * (70_000 - MAX_DUMP_BYTES)  # the rest, later
        assert read_dump(read) == b""  # nothing now: a non-blocking read does not wait
    finally:
        os.close(read)
        os.close(write)
