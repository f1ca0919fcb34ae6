"""The child's end of the bridge, in-process: the first host frames (Prepare, then Start)."""

from __future__ import annotations

import os

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
