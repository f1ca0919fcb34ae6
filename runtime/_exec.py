"""A child that runs another engine: after the same containment, ``execve`` it on the run's pipes.

The containment a Python child gets (session, namespaces, cgroups, working directory,
Landlock, rlimits, uid, capabilities, seccomp) is inherited across ``execve``; what the
engine needs on top is its pipes at fixed numbers: fd 0 the host's frames, fd 1 its own, fd 2
the run's log pipe (already there).
"""

from __future__ import annotations

import os
import resource
import signal
from typing import NoReturn

from runtime._wire import Prepare

__all__ = ("exec_engine",)


def exec_engine(prepare: Prepare, ctl_in: int, ctl_out: int) -> NoReturn:
    """Put the bridge on fds 0 and 1 and become ``prepare.exec_argv`` (an absolute path
    first) under its data rlimit; never returns. Signals are back to their defaults, none
    blocked (Python ignores SIGPIPE and SIGXFSZ; an ignored signal would stay ignored)."""
    if prepare.exec_data_bytes:
        limit = prepare.exec_data_bytes
        resource.setrlimit(resource.RLIMIT_DATA, (limit, limit))
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
    os.execve(prepare.exec_argv[0], prepare.exec_argv, prepare.exec_env)
