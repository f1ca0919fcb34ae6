"""The load section's burners: real processes, gone when the block ends or their parent dies."""

from __future__ import annotations

import subprocess
import sys
import time

import psutil
import pytest

from benchmarks._load import BURN, burners


def test_burners_run_during_the_block_and_are_reaped_after_it() -> None:
    with burners(2) as procs:
        assert len(procs) == 2 and all(p.poll() is None for p in procs)
        pids = [p.pid for p in procs]
    assert all(p.returncode is not None for p in procs)
    assert not any(psutil.pid_exists(pid) for pid in pids)


def test_burners_are_reaped_when_the_block_raises() -> None:
    with pytest.raises(RuntimeError), burners(1) as procs:
        raise RuntimeError("the section failed")
    assert procs[0].returncode is not None


def test_a_burner_stops_by_itself_when_its_parent_is_gone() -> None:
    # A middle process starts a burner and exits without killing it (as a SIGKILLed harness
    # would): the burner sees its parent change and ends.
    middle = (
        "import subprocess, sys, os\n"
        f"p = subprocess.Popen([sys.executable, '-I', '-S', '-c', {BURN!r}, str(os.getpid())], "
        "stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)\n"
        "print(p.pid, flush=True)\n"
        "os._exit(0)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", middle], capture_output=True, text=True, timeout=60, check=True
    )
    burner = psutil.Process(int(done.stdout.split()[0]))
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                if burner.status() == psutil.STATUS_ZOMBIE:
                    break
            except psutil.NoSuchProcess:
                break
            time.sleep(0.01)
        else:
            pytest.fail("the burner outlived its parent")
    finally:
        try:
            burner.kill()
        except psutil.NoSuchProcess:
            pass
