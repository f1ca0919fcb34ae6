"""CPU placement: keep a dying run's exit off the CPU the host's event loop runs on."""

from __future__ import annotations

import ctypes
import os

__all__ = ("move_off_this_cpu",)

_libc = ctypes.CDLL(None, use_errno=True)


def move_off_this_cpu(pids: list[int]) -> None:
    """Let ``pids`` run anywhere the host may, except the CPU the host runs on now.

    A pipe write is a "sync" wake-up: the kernel puts the woken host on the CPU of the
    child that wrote its report. The killed child then spends its exit (freeing its
    memory, most of a millisecond here) on the host's CPU, after the host is done, while
    another CPU idles. Moved, the exit runs beside the host's own settling.
    """
    cpu = _libc.sched_getcpu()
    if cpu < 0:
        return
    try:
        others = os.sched_getaffinity(0) - {cpu}
    except OSError:
        return
    if not others:
        return  # one CPU: nowhere to go
    for pid in pids:
        try:
            os.sched_setaffinity(pid, others)
        except OSError:
            pass  # gone already, or not ours to move
