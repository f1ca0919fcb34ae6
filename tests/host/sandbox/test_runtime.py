"""SubprocessRuntime end to end, what is Python's own (the shared contract: test_contract.py)."""

from __future__ import annotations

import os
from typing import Any

import anyio
import psutil
import pytest

from host.sandbox import SubprocessRuntime
from host.sandbox._rooms import ROOMS_AHEAD
from runtime import Limits, RunRequest, RunResult, ToolCallError
from tests.host.sandbox.conftest import can_still_run, settled
from tests.host.sandbox.hostile import bridge_helpers
from tests.runtime.bare_cases import REFUSED, SHOWN

pytestmark = pytest.mark.anyio

FAST = Limits(compute_ms=2_000, max_wall_ms=10_000)


async def _add(args: Any) -> Any:
    return args["a"] + args["b"]


async def _echo(args: Any) -> Any:
    return args


async def _fail(args: Any) -> Any:
    raise ToolCallError("tools.fail", "it broke", "TOOL_ERROR")


async def run(rt: SubprocessRuntime, program: str, **kwargs: Any) -> RunResult:
    kwargs.setdefault("limits", FAST)
    kwargs.setdefault("bindings", {"tools.add": _add, "tools.echo": _echo, "tools.fail": _fail})
    return await rt.run(RunRequest(program=program, **kwargs))


async def test_inputs_are_globals(rt: SubprocessRuntime) -> None:
    result = await run(
        rt, "return [n * 2 for n in numbers], name", inputs={"numbers": [1, 2], "name": "x"}
    )
    assert result.error is not None and result.error.kind == "invalid_completion"
    result = await run(
        rt, "return {'doubled': [n * 2 for n in numbers]}", inputs={"numbers": [1, 2]}
    )
    assert result.value == {"doubled": [2, 4]}


async def test_exceptions_report_type_text_and_program_lines_only(rt: SubprocessRuntime) -> None:
    result = await run(rt, "def f(x):\n    return 1 / x\n\nf(0)")
    error = result.error
    assert error is not None and error.kind == "exception"
    assert error.exception_type == "ZeroDivisionError"
    assert "ZeroDivisionError: division by zero" in error.message
    assert 'File "<program>", line 4' in error.message
    assert 'File "<program>", line 2, in f' in error.message
    assert "return 1 / x" in error.message
    assert "runtime" not in (error.traceback or "").replace("<program>", "")
    assert error.lineno == 2


@pytest.mark.parametrize(
    "program", ["raise SystemExit(0)", "import sys\nsys.exit(0)", "raise KeyboardInterrupt"]
)
async def test_system_exit_and_keyboard_interrupt_are_failures(
    rt: SubprocessRuntime, program: str
) -> None:
    result = await run(rt, program)
    assert result.error is not None and result.error.kind == "exception"


@pytest.mark.parametrize(
    ("program", "needle"),
    [
        ("return (1, 2)", "tuple at $"),
        ("return {'items': [1, 2, 3, {4}]}", "set at $.items[3]"),
        ("return float('nan')", "non-finite float nan at $"),
        ("x = []\nx.append(x)\nreturn x", "cycle"),
        ("async def f(): pass\nreturn f()", "forget `await`"),
        ("return b'x'", "bytes at $"),
    ],
)
async def test_results_that_are_not_lossless_json_are_invalid(
    rt: SubprocessRuntime, program: str, needle: str
) -> None:
    result = await run(rt, program)
    assert result.error is not None and result.error.kind == "invalid_completion"
    assert needle in result.error.message


#: A generous bound on how far past a 150 ms compute budget a run may be stopped: a sanity
#: bound under load (the benchmarks measure the real figure). The last resort, RLIMIT_CPU,
#: fires at the budget rounded up to a second plus 2: a test within this bound shows that
#: the child's own CPU timer or the host's watchdog stopped the run, not the rlimit.
_BUDGET_SLACK_MS = 1_200


async def test_a_hot_loop_that_blocks_sigxcpu_is_stopped_by_the_host(rt: SubprocessRuntime) -> None:
    # The child's own CPU timer cannot fire: only the host's watchdog stops this one in time.
    program = (
        "import signal\n"
        "signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGXCPU})\n"
        "while True:\n    pass\n"
    )
    result = await run(rt, program, limits=Limits(compute_ms=150, max_wall_ms=30_000))
    assert result.error is not None and result.error.budget == "compute", result.error
    assert result.stats is not None and result.stats.compute_ms < 150 + _BUDGET_SLACK_MS
    assert result.stats.wall_ms < 150 + _BUDGET_SLACK_MS * 2


async def test_the_child_carries_its_own_cpu_timer_at_the_budget(rt: SubprocessRuntime) -> None:
    # A POSIX timer on the process CPU clock (-6: the kernel's name for this process's
    # CLOCK_PROCESS_CPUTIME_ID) that sends SIGXCPU (24): a hot loop stops at
    # its budget however busy the host is (SIGXCPU ends the process; the host reports it as
    # the compute budget).
    result = await run(rt, "open('/proc/self/timers').read()", limits=Limits(compute_ms=150))
    timers = result.value
    assert "signal: 24/" in timers and "ClockID: -6" in timers, timers
    killed = await run(
        rt, "import os, signal\nos.kill(os.getpid(), signal.SIGXCPU)", limits=Limits(compute_ms=150)
    )
    assert killed.error is not None and killed.error.budget == "compute"


async def test_a_busy_thread_behind_an_awaited_binding_is_billed(rt: SubprocessRuntime) -> None:
    async def slow(args: Any) -> Any:
        await anyio.sleep(30)

    program = (
        "import threading\n"
        "def spin():\n"
        "    while True:\n"
        "        pass\n"
        "threading.Thread(target=spin, daemon=True).start()\n"
        "await tools.slow()\n"
    )
    result = await run(
        rt,
        program,
        bindings={"tools.slow": slow},
        limits=Limits(compute_ms=200, max_wall_ms=20_000),
    )
    assert result.error is not None and result.error.budget == "compute"


async def test_busy_children_are_billed_and_killed(rt: SubprocessRuntime) -> None:
    program = (
        "import subprocess, sys\n"
        "p = subprocess.Popen([sys.executable, '-c', 'while True: pass'])\n"
        "p.wait()\n"
    )
    result = await run(rt, program, limits=Limits(compute_ms=400, max_wall_ms=20_000))
    assert result.error is not None and result.error.budget == "compute"


@pytest.mark.parametrize(
    "program",
    [
        "import time\ntime.sleep(60)",
        "import os, signal\npid = os.fork()\nif pid == 0:\n    os.kill(os.getpid(), signal.SIGSTOP)\n    os._exit(0)\nos.waitpid(pid, 0)",
    ],
)
async def test_wall_budget(rt: SubprocessRuntime, program: str) -> None:
    result = await run(rt, program, limits=Limits(max_wall_ms=300))
    assert result.error is not None
    assert (result.error.kind, result.error.budget) == ("budget", "wall")


async def test_raw_fd_writes_count_toward_the_output_limit(rt: SubprocessRuntime) -> None:
    program = "import os\nos.write(1, b'x' * 5000 + b'\\n')\nreturn 1"
    result = await run(rt, program, limits=Limits(max_output_bytes=1000))
    assert result.error is not None and result.error.kind == "output_limit"


async def test_os_exit_and_signals_are_deaths_with_a_status(rt: SubprocessRuntime) -> None:
    result = await run(rt, "import os\nos._exit(3)")
    assert result.error is not None
    assert (result.error.kind, result.error.exit_status) == ("died", 3)
    result = await run(rt, "import ctypes\nctypes.string_at(0)")
    assert result.error is not None
    assert (result.error.kind, result.error.exit_status) == ("died", -11)


async def test_logs_from_every_path_arrive_in_order(rt: SubprocessRuntime) -> None:
    program = (
        "import os, sys, subprocess\n"
        "print('one')\n"
        "sys.stderr.write('two\\n')\n"
        "os.write(1, b'three\\n')\n"
        "subprocess.run([sys.executable, '-c', 'print(\"four\")'])\n"
        "print('five', end='')\n"
    )
    result = await run(rt, program)
    assert result.logs == ["one", "two", "three", "four", "five"]


async def test_the_environment_is_empty_and_the_workdir_private(rt: SubprocessRuntime) -> None:
    os.environ["DSH_TEST_SECRET"] = "hunter2"
    try:
        program = "import os\nopen('f.txt', 'w').write('x')\nreturn [dict(os.environ), os.getcwd(), os.listdir('.')]"
        first = await run(rt, program)
        second = await run(rt, program)
    finally:
        del os.environ["DSH_TEST_SECRET"]
    env, cwd, files = first.value
    assert env == {}
    assert files == ["f.txt"]
    assert cwd != second.value[1]
    await settled(rt)
    assert not os.path.exists(cwd)


async def test_the_child_has_its_own_session_and_limits(rt: SubprocessRuntime) -> None:
    # Sessions are compared from the host's view: inside a PID namespace getsid() of a
    # leader outside it reads 0, which is also what a host in a container may read.
    seen: dict[str, Any] = {}

    async def sessions(args: Any) -> Any:
        host = psutil.Process()
        template = {p.pid for p in host.children()}
        run_tree = [p.pid for p in host.children(recursive=True) if p.pid not in template]
        seen["tree"] = [(os.getsid(pid), os.getpgid(pid)) for pid in run_tree]
        seen["template"] = [(os.getsid(pid), os.getpgid(pid)) for pid in template]
        return None

    program = (
        "import os, resource\n"
        "await tools.sessions()\n"
        "return [list(resource.getrlimit(resource.RLIMIT_CORE)), sorted(int(f) for f in os.listdir('/proc/self/fd'))[:3]]"
    )
    result = await run(rt, program, bindings={"tools.sessions": sessions})
    assert result.value == [[0, 0], [0, 1, 2]]
    assert seen["tree"], "the run's processes were not found under the template"
    outside = {(os.getsid(0), os.getpgrp()), *seen["template"]}
    for sid, pgid in seen["tree"]:
        assert all(sid != other_sid and pgid != other_pgid for other_sid, other_pgid in outside)


_DOUBLE_FORK = """
import os
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        os.execvp("sleep", ["sleep", "MARK"])
    os._exit(0)
os.wait()
return 1
"""


def _marked(mark: str) -> list[int]:
    """Host pids of processes that can still run whose command line carries ``mark``."""
    import psutil

    found = []
    for proc in psutil.process_iter(["cmdline"]):
        if mark in (proc.info["cmdline"] or []) and can_still_run(proc.pid):
            found.append(proc.pid)
    return found


@pytest.mark.parametrize(
    "program",
    [
        "import subprocess\nsubprocess.Popen(['sleep', 'MARK'])\nreturn 1",
        _DOUBLE_FORK,
        "import subprocess\nsubprocess.Popen(['sleep', 'MARK'], start_new_session=True)\nreturn 1",
    ],
    ids=["child", "double-fork-setsid", "new-session"],
)
async def test_nothing_the_program_started_survives_the_run(
    rt: SubprocessRuntime, program: str
) -> None:
    mark = f"{600 + os.getpid() % 1000}.{id(program) % 100000}"  # a unique `sleep` argument
    result = await run(rt, program.replace("MARK", mark))
    assert result.value == 1, result.error
    assert _marked(mark) == []  # killed by the time run() returned: none can run again


def _bridge_writer() -> str:
    return bridge_helpers() + "fd = CTL_OUT\n"


async def test_an_oversized_frame_is_skipped(rt: SubprocessRuntime) -> None:
    program = _bridge_writer() + "os.write(fd, struct.pack('!I', 2**31))\nreturn 1"
    result = await rt.run(RunRequest(program=program, limits=FAST))
    # the huge prefix swallows the stream: the child's Done is lost inside the skipped frame
    assert result.error is not None and result.error.kind == "died"
    assert result.error.exit_status == 0  # it reported and left; the report never arrived
    assert result.stats is not None and result.stats.dropped_frames == 1  # the oversized one


async def test_a_forged_compiled_frame_is_dropped(rt: SubprocessRuntime) -> None:
    # The host compiled this program: a child that says it compiled it is forging.
    program = _bridge_writer() + "send({'type': 'Compiled'})\nreturn 1"
    result = await run(rt, program)
    assert result.value == 1
    assert result.stats is not None and result.stats.dropped_frames == 1


async def test_a_call_to_an_unknown_name_is_answered_unknown_tool(rt: SubprocessRuntime) -> None:
    # No loop reads the bridge in a program of plain calls that makes none: it reads the
    # answer itself.
    program = _bridge_writer() + (
        "import select\n"
        "send({'type': 'Call', 'id': 1, 'name': 'tools.nope', 'args': {}})\n"
        "select.select([CTL_IN], [], [], 5)\n"
        "data = os.read(CTL_IN, 4096)\n"
        "reply = json.loads(data[4:])\n"
        "[reply['type'], reply['id'], reply['code'], reply['tool']]\n"
    )
    result = await run(rt, program, call_style="sync")
    assert result.value == ["ReplyError", 1, "UNKNOWN_TOOL", "tools.nope"]
    assert result.stats is not None and result.stats.calls == 1


async def test_a_child_that_closes_the_bridge_and_hangs_has_died(rt: SubprocessRuntime) -> None:
    program = _bridge_writer() + "os.close(fd)\nimport time\ntime.sleep(60)"
    with anyio.fail_after(5):
        result = await run(rt, program, limits=Limits(max_wall_ms=30_000))
    assert result.error is not None and result.error.kind == "died"


async def test_two_hundred_runs_leave_nothing_behind(rt: SubprocessRuntime) -> None:

    from tests.host.sandbox.conftest import live_children, open_fds

    await run(rt, "1")  # starts the template, which holds one socket for the runtime's life
    await settled(rt)
    fds = len(open_fds(but_cgroups=True))
    for i in range(200):
        result = await run(rt, f"print({i})\nreturn {i}")
        assert result.value == i
    await settled(rt)
    # the same count: a spare's pipes change numbers, not count
    assert len(open_fds(but_cgroups=True)) == fds
    cgroups = rt._rooms.cgroups
    if cgroups is not None:  # cgroups kept for reuse: no more than runs (and rooms) can overlap
        assert len(cgroups._free) <= rt._max_concurrent + rt._prefork + ROOMS_AHEAD
    template = rt._template
    assert template is not None and template.pid is not None
    with anyio.fail_after(5):  # killed children are reaped, the next spares are forked
        while len(live := live_children(template.pid)) != rt._prefork:
            await anyio.sleep(0.01)
    assert len(live) == rt._prefork  # the spares, forked ahead


async def test_nothing_survives_a_run_that_failed(rt: SubprocessRuntime) -> None:
    mark = f"{700 + os.getpid() % 1000}.{os.getpid() % 977}"
    program = f"import subprocess\nsubprocess.Popen(['sleep', '{mark}'])\nraise ValueError('x')"
    result = await run(rt, program)
    assert result.error is not None and result.error.kind == "exception"
    assert _marked(mark) == []


async def test_a_long_program_is_compiled_by_its_child(
    rt: SubprocessRuntime, monkeypatch: pytest.MonkeyPatch
) -> None:
    import host.sandbox._runtime as runtime_module

    compiled_here: list[int] = []
    original = runtime_module.compile_program  # type: ignore[attr-defined]

    def spy(source: str, policy: Any = "python") -> Any:
        compiled_here.append(len(source))
        return original(source, policy)

    monkeypatch.setattr(runtime_module, "compile_program", spy)
    body = "x = 1\n" * 5_000  # over 20 000 characters: not compiled on the host's event loop
    result = await run(rt, body + "return x + 1")
    assert result.value == 2
    assert compiled_here == []  # the child compiled it
    await run(rt, "return 1")
    assert compiled_here == [len("return 1")]  # a short one is compiled here
    broken = await run(rt, body + "return (")
    assert broken.error is not None and broken.error.kind == "parse"
    assert broken.error.lineno == 5_001
    assert "SyntaxError" in broken.error.message


_BUFFERED = (
    "import io, sys\n"
    "sys.stdout = io.TextIOWrapper(io.BufferedWriter(io.FileIO(1, 'w', closefd=False)))\n"
    "print('kept')\n"
)


async def test_buffered_output_is_flushed_before_the_report(rt: SubprocessRuntime) -> None:
    # The host kills the run as soon as it reads the report: what the program left in a
    # buffer must reach the logs first, on success and on failure alike.
    done = await run(rt, _BUFFERED + "return 1")
    assert (done.value, done.logs) == (1, ["kept"])
    failed = await run(rt, _BUFFERED + "raise ValueError('x')")
    assert failed.error is not None and failed.error.kind == "exception"
    assert failed.logs == ["kept"]


async def test_a_spare_waits_in_its_own_directory_before_its_program_arrives(
    rt: SubprocessRuntime,
) -> None:
    first = await run(rt, "import os\nreturn os.getcwd()")
    spare = rt._spares[0]
    assert os.path.isdir(spare.workdir) and spare.workdir != first.value

    def in_it() -> bool:  # the spare's program process has moved in, ahead of the run
        try:
            tree = psutil.Process(spare.pid).children(recursive=True) if spare.pid else []
            procs = [psutil.Process(spare.pid), *tree] if spare.pid else []
            return any(p.cwd() == spare.workdir for p in procs)
        except psutil.Error:
            return False

    with anyio.fail_after(5):
        while spare.pid is None:
            await spare.wait_pid()
        while not in_it():
            await anyio.sleep(0.01)
    second = await run(rt, "import os\nreturn os.getcwd()")
    assert second.value == spare.workdir
    await settled(rt)
    assert not os.path.exists(spare.workdir)  # removed once the run's processes are gone


@pytest.mark.parametrize(("program", "value", "is_repr"), SHOWN)
async def test_a_bare_last_expression_that_is_not_json_is_its_repr(
    rt: SubprocessRuntime, program: str, value: Any, is_repr: bool
) -> None:
    result = await run(rt, program)
    assert result.error is None
    assert (result.value, result.value_is_repr) == (value, is_repr)
    if is_repr:
        assert result.to_json() == {"value": value, "value_is_repr": True, "logs": []}


@pytest.mark.parametrize(
    ("program", "message"),
    [
        *REFUSED,
        (
            "async def f():\n    pass\nf()",
            "the result is not lossless JSON: a coroutine (did you forget `await`?) at $",
        ),
    ],
)
async def test_a_returned_value_that_is_not_json_stays_a_failure(
    rt: SubprocessRuntime, program: str, message: str
) -> None:
    result = await run(rt, program)
    assert result.error is not None and result.error.kind == "invalid_completion"
    assert message in result.error.message


async def test_a_repr_past_the_output_cap_is_an_output_limit(rt: SubprocessRuntime) -> None:
    result = await run(rt, "set(range(10_000))", limits=Limits(max_output_bytes=1_000))
    assert result.error is not None and result.error.kind == "output_limit"
