"""Hostile programs against the compute and wall budgets: CPU in C, hidden threads, signals."""

from __future__ import annotations

import pytest

from host.sandbox import SubprocessRuntime
from runtime import Limits
from tests.host.sandbox.hostile import (
    ONE_BACKEND,
    expect,
    run_hostile,
)

pytestmark = pytest.mark.anyio


# ---- CPU burned in C, hidden threads, signals ----------------------------------------------


@ONE_BACKEND
@pytest.mark.parametrize(
    "program",
    [
        pytest.param("x = 10 ** 10 ** 7", id="huge-power"),
        pytest.param("import re\nre.match(r'(a+)+$', 'a' * 64 + 'b')", id="catastrophic-regex"),
        pytest.param(
            "import threading, time, re\n"
            "threading.Thread(target=re.match, args=(r'(a+)+$', 'a' * 64 + 'b'), daemon=True).start()\n"
            "time.sleep(60)",
            id="hidden-thread-in-c",
        ),
        pytest.param(
            "import threading, asyncio\n"
            "def spin():\n    while True:\n        pass\n"
            "for _ in range(8):\n    threading.Thread(target=spin, daemon=True).start()\n"
            "await asyncio.sleep(60)",
            id="eight-busy-threads",
        ),
        pytest.param(
            "import signal\n"
            "for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGXCPU, signal.SIGUSR1):\n"
            "    signal.signal(s, signal.SIG_IGN)\n"
            "signal.pthread_sigmask(signal.SIG_BLOCK, signal.valid_signals())\n"
            "while True:\n    pass",
            id="ignored-and-blocked-signals",
        ),
        pytest.param(
            "class E(Exception):\n"
            "    def __str__(self):\n        while True:\n            pass\n"
            "raise E()",
            id="exception-str-spins",
        ),
    ],
)
async def test_cpu_burners_hit_the_compute_budget(rt: SubprocessRuntime, program: str) -> None:
    result = await run_hostile(rt, program)
    expect(result, "budget", "compute")


@ONE_BACKEND
async def test_blocked_signals_and_sleep_hit_the_wall_budget(rt: SubprocessRuntime) -> None:
    program = (
        "import signal, time\n"
        "signal.pthread_sigmask(signal.SIG_BLOCK, signal.valid_signals())\n"
        "time.sleep(60)\n"
    )
    result = await run_hostile(rt, program, limits=Limits(compute_ms=500, max_wall_ms=500))
    expect(result, "budget", "wall")


@ONE_BACKEND
async def test_sigint_to_itself_is_an_exception(rt: SubprocessRuntime) -> None:
    program = "import os, signal, time\nos.kill(os.getpid(), signal.SIGINT)\ntime.sleep(5)"
    result = await run_hostile(rt, program)
    expect(result, "exception")
    assert result.error is not None and result.error.exception_type == "KeyboardInterrupt"
