"""CPU placement of a dying run: moved off the host's CPU, where there is another."""

from __future__ import annotations

import os
import subprocess

from host.sandbox._cpu import move_off_this_cpu


def test_a_process_is_moved_to_every_allowed_cpu_but_one() -> None:
    proc = subprocess.Popen(["sleep", "30"])
    try:
        allowed = os.sched_getaffinity(0)
        move_off_this_cpu([proc.pid])
        moved = os.sched_getaffinity(proc.pid)
        if len(allowed) == 1:
            assert moved == allowed  # nowhere to go: left as it was
        else:
            assert moved < allowed and len(moved) == len(allowed) - 1
    finally:
        proc.kill()
        proc.wait()


def test_gone_processes_are_ignored() -> None:
    proc = subprocess.Popen(["true"])
    proc.wait()
    move_off_this_cpu([proc.pid, 0x3FFFFFFF])  # reaped, and a pid that cannot exist
