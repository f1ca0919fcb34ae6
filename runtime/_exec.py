"""A child that runs another engine: after the same containment, ``execve`` it on the run's pipes.

The containment a Python child gets (session, namespaces, cgroups, working directory,
Landlock, rlimits, uid, capabilities, seccomp) is inherited across ``execve``; what the
engine needs on top is its pipes at fixed numbers: fd 0 the host's frames, fd 1 its own, fd 2
the run's log pipe (already there).
"""

from __future__ import annotations

import os
import signal
from typing import NoReturn

__all__ = ("exec_engine",)


def exec_engine(argv: list[str], env: dict[str, str], ctl_in: int, ctl_out: int) -> NoReturn:
    """Put the bridge on fds 0 and 1 and become ``argv`` (an absolute path first); never
    returns. Signals are back to their defaults, none blocked (Python ignores SIGPIPE and
    SIGXFSZ; an ignored signal would stay ignored in the engine)."""
    os.dup2(ctl_in, 0)
    os.dup2(ctl_out, 1)
    for fd in {ctl_in, ctl_out} - {0, 1, 2}:
        os.close(fd)
    signal.pthread_sigmask(signal.SIG_SETMASK, set())
    for sig in signal.valid_signals():
        if sig not in (signal.SIGKILL, signal.SIGSTOP):
            try:
                signal.signal(sig, signal.SIG_DFL)
            except (OSError, ValueError):
                continue
    os.execve(argv[0], argv, env)
