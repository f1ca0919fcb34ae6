"""Fixtures for the subprocess backend: a runtime per test, and a leak check around it."""

from __future__ import annotations

import glob
import os
import tempfile
from collections.abc import AsyncIterator

import psutil
import pytest

from host.sandbox import SubprocessRuntime


def run_dirs() -> set[str]:
    """The private working directories of runs that still exist."""
    return set(glob.glob(os.path.join(tempfile.gettempdir(), "dsh-run-*")))


def open_fds() -> set[int]:
    """The host's open fds."""
    return {int(fd) for fd in os.listdir("/proc/self/fd")}


@pytest.fixture
async def rt() -> AsyncIterator[SubprocessRuntime]:
    """A fresh runtime; after the test, nothing it started may be left (processes, dirs, fds)."""
    dirs_before = run_dirs()
    runtime = SubprocessRuntime()
    fds_before = open_fds()
    async with runtime:
        yield runtime
    assert psutil.Process().children(recursive=True) == []
    assert run_dirs() - dirs_before == set()
    assert open_fds() - fds_before == set()
