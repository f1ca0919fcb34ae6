"""The flood section's RSS sampler: it sees memory this process takes while it runs."""

from __future__ import annotations

import threading
import time

from benchmarks._flood import RssPeak


def test_the_peak_counts_memory_held_during_the_block() -> None:
    with RssPeak() as rss:
        block = bytearray(64 << 20)
        block[::4096] = b"x" * len(block[::4096])  # touch every page
        time.sleep(0.05)  # held while this thread waits (as the host's loop does)
        del block
    assert rss.growth_mib >= 60
    assert rss.peak >= rss.before


def test_the_sampler_thread_is_gone_after_the_block() -> None:
    before = threading.active_count()
    with RssPeak(interval_s=0.001):
        assert threading.active_count() == before + 1
    assert threading.active_count() == before
