"""Shared helpers of the MCP tests: the test servers' command lines and the environment."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

SERVERS = Path(__file__).parent / "servers"
DEMO = SERVERS / "demo.py"
FAULTY = SERVERS / "faulty.py"
TRACED = SERVERS / "traced.py"
BINDINGS = SERVERS / "bindings.py"
#: The folder holding ``host`` and ``runtime``, for subprocesses that import them.
ROOT = Path(__file__).resolve().parents[3]


def child_env() -> dict[str, str]:
    """The environment for a ``dsh-code`` subprocess: ours, with the source tree importable."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    return env


def demo_option(name: str = "demo") -> str:
    """A ``--mcp`` value starting the demo server."""
    return f"{name}={sys.executable} {DEMO}"


def faulty_option(mode: str = "ok", name: str = "faulty") -> str:
    """A ``--mcp`` value starting the fault-injecting server in ``mode``."""
    return f"{name}={sys.executable} {FAULTY} {mode}"


def pid_alive(pid: int) -> bool:
    """Whether a process exists (and is not a zombie)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError):
        return False


def wait_gone(pid: int, timeout: float = 10.0) -> bool:
    """Wait until ``pid`` is gone; False if it is still there after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while pid_alive(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True
