"""The hostile section: its hold lets no other thread of the host in; a quick run (opt-in)."""

from __future__ import annotations

import threading
import time

import anyio
import pytest

from benchmarks._common import Config
from benchmarks._hostile import _hold_the_interpreter, run


def test_the_hold_keeps_every_other_thread_of_the_host_out() -> None:
    ticks: list[float] = []
    stop = threading.Event()

    def tick() -> None:
        while not stop.is_set():
            ticks.append(time.monotonic())
            time.sleep(0.001)

    thread = threading.Thread(target=tick)
    thread.start()
    time.sleep(0.02)
    began = time.monotonic()
    _hold_the_interpreter(0.3)
    ended = time.monotonic()
    stop.set()
    thread.join()
    assert not [t for t in ticks if began + 0.05 < t < ended - 0.05]


@pytest.mark.bench
def test_a_quick_run_measures_every_row_without_failures() -> None:
    section = anyio.run(run, Config(quick=True))
    for row in section.rows:
        assert row.failures == 0 and row.metrics["value"], row
