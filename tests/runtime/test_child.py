"""The child's end of the bridge, in-process: the first host frames (Prepare, then Start)."""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import msgspec
from hypothesis import given
from hypothesis import strategies as st

from runtime._bridge import Bridge
from runtime._wire import Prepare, Reply, Start, encode_frame

_PREPARE = Prepare(workdir="/tmp/x", file_bytes=1 << 20, open_files=64, linger=False, warm_up=True)
_START = Start(
    code=b"",
    source="return 1",
    policy="python",
    call_style="async",
    inputs={"n": 1},
    bindings=["tools.a"],
    max_output_bytes=100,
    heap_bytes=1 << 20,
    compute_ns=2_000_000_000,
)


@given(st.lists(st.integers(1, 40), min_size=1, max_size=20))
def test_prepare_and_start_are_read_in_order_however_they_arrive(cuts: list[int]) -> None:
    # A fresh fork (no spare) finds Prepare and Start in its pipe at once; a spare gets
    # them apart. Either way each is read whole and in order, and a frame read with them
    # is kept for the bridge's reader.
    stream = encode_frame(_PREPARE) + encode_frame(_START) + encode_frame(Reply(id=1, value=2))
    r, w = os.pipe()
    try:
        pos = 0
        for cut in cuts:
            os.write(w, stream[pos : pos + cut])
            pos += cut
        os.write(w, stream[pos:])
        bridge = Bridge(r, w)
        assert bridge.read_first(Prepare) == _PREPARE
        assert bridge.read_first(Start) == _START
        # everything was in the pipe before the first read, so the reply came with it
        assert [msgspec.json.decode(b, type=Reply) for b in bridge._read_ahead] == [
            Reply(id=1, value=2)
        ]
    finally:
        os.close(r)
        os.close(w)


_BUSY_AFTER_ARMING = """
import os, sys
from runtime._child import _dump_stacks_at_budgets
_dump_stacks_at_budgets(int(sys.argv[1]))
os.write(1, b"armed\\n")
while True:
    pass
"""


def test_a_second_ask_while_the_stacks_are_written_waits_for_them() -> None:
    # The child's own CPU timer, the template and the host's watchdog may each send SIGXCPU
    # at a budget; one arriving mid-dump must not end the process with half a dump. The
    # dump is held here on a full pipe, so the second signal surely arrives during it.
    r, w = os.pipe()
    fcntl.fcntl(w, fcntl.F_SETPIPE_SZ, 4096)
    os.set_blocking(w, False)
    with contextlib.suppress(BlockingIOError):
        while True:
            os.write(w, b"." * 4096)
    os.set_blocking(w, True)
    child = subprocess.Popen(
        [sys.executable, "-c", _BUSY_AFTER_ARMING, str(w)],
        pass_fds=(w,),
        stdout=subprocess.PIPE,
        cwd=Path(__file__).parents[2],
    )
    os.close(w)
    try:
        assert child.stdout is not None and child.stdout.readline() == b"armed\n"
        child.send_signal(signal.SIGXCPU)
        time.sleep(0.2)  # the handler is blocked writing the dump
        child.send_signal(signal.SIGXCPU)
        time.sleep(0.2)
        assert child.poll() is None, "the second signal ended the dump half-written"
        dump = b""
        while chunk := os.read(r, 65536):
            dump += chunk
        assert child.wait(timeout=10) == -signal.SIGXCPU
    finally:
        child.kill()
        child.wait()
        os.close(r)
        if child.stdout is not None:
            child.stdout.close()
    first = dump.lstrip(b".").split(b"Current thread")[1]
    assert b"(most recent call first):\n" in first
    # whole: the header, then the program's frame (where it was: the signal may come
    # before the loop's first line has begun)
    assert re.search(rb'File "<string>", line [5-7] in <module>\n', first)
