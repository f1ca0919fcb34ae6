"""Helpers for the adapter tests: the processes a test leaves behind."""

from __future__ import annotations

import gc

import psutil


def children() -> set[int]:
    """The pids of this process's descendants."""
    return {p.pid for p in psutil.Process().children(recursive=True)}


def left_behind(before: set[int]) -> set[int]:
    """Descendants started since ``before`` that still exist (after a collection)."""
    gc.collect()
    return {pid for pid in children() - before if psutil.pid_exists(pid)}
