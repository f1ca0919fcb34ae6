"""Helpers for the adapter tests: the processes and cgroups a test leaves behind."""

from __future__ import annotations

import gc

import psutil

from tests.host.sandbox.conftest import our_cgroups


def children() -> set[int]:
    """The pids of this process's descendants."""
    return {p.pid for p in psutil.Process().children(recursive=True)}


def left_behind(before: set[int]) -> set[object]:
    """Descendants started since ``before`` that still exist (after a collection), and the
    cgroup directories runtimes of this process left."""
    gc.collect()
    left: set[object] = {pid for pid in children() - before if psutil.pid_exists(pid)}
    return left | set(our_cgroups())
