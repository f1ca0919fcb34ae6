"""The peer sandbox, pydantic-monty (optional ``bench`` extra): detection and small helpers.

Monty runs a Python subset in a pool of ``monty`` worker processes. We use its pool API as
installed (checked with ``help()``, version 1.4): ``Monty(...)`` / ``AsyncMonty(...)`` pools,
``pool.checkout(limits=ResourceLimits(...))`` as a (async) context manager giving a session,
and ``session.feed_run(code, external_lookup={...})``. The sync pool is used where the host
only waits (start-up, compute, budgets, heap, output); the async pool where host callables
must be coroutines (binding calls, concurrent runs).
"""

from __future__ import annotations

import time
from typing import Any

__all__ = ("monty", "monty_missing", "monty_version", "worker_cpu_ms")

_CPUCLOCK_SCHED = 2  # the process CPU clock id of another pid: ((~pid) << 3) | CPUCLOCK_SCHED


def monty() -> Any:
    """The ``pydantic_monty`` module, or None when it is not installed."""
    try:
        import pydantic_monty  # type: ignore[import-not-found, unused-ignore]
    except ImportError:
        return None
    return pydantic_monty


def monty_version() -> str | None:
    """The installed pydantic-monty version, or None."""
    module = monty()
    return None if module is None else str(getattr(module, "__version__", "unknown"))


def monty_missing() -> str:
    return "pydantic-monty is not installed (pip install 'dsh-code[bench]')"


def worker_cpu_ms(pid: int | None) -> float | None:
    """Busy CPU of a monty worker process (every thread, ns resolution), or None when gone."""
    if pid is None:
        return None
    try:
        return time.clock_gettime_ns(((~pid) << 3) | _CPUCLOCK_SCHED) / 1e6
    except OSError:
        return None


def timed(fn: Any, *args: Any, **kwargs: Any) -> tuple[float, Any, BaseException | None]:
    """(milliseconds, result, exception) of one call of ``fn``."""
    t = time.perf_counter()
    try:
        value = fn(*args, **kwargs)
    except Exception as exc:
        return (time.perf_counter() - t) * 1000, None, exc
    return (time.perf_counter() - t) * 1000, value, None
