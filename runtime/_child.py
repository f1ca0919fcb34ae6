"""What runs inside the child: set-up after fork, then the program, then the report.

Everything here runs in a process the program controls; it trusts nothing from it and
reports through ``ctl_out`` in frames, then leaves with ``os._exit`` (no atexit, no
thread joins: the run settles as soon as the result is known).
"""

from __future__ import annotations

import asyncio
import builtins
import ctypes
import difflib
import faulthandler
import functools
import io
import linecache
import marshal
import os
import resource
import signal
import struct
import sys
import threading
import types
from dataclasses import dataclass
from typing import Any

from runtime._bridge import Bridge, CallStyle, make_binding
from runtime._contain import (
    enter_namespaces,
    hide_cgroups,
    landlock,
    make_mounts_private,
    make_root_read_only,
    mount_proc,
    mount_workdir,
)
from runtime._errors import ToolCallError
from runtime._exec import exec_engine
from runtime._privileges import (
    become,
    clear_capabilities,
    defer_repeats,
    drop_bounding_set,
    join_new_session_keyring,
    load_seccomp,
    start_cpu_timer,
)
from runtime._program import (
    FILENAME,
    ProgramRejected,
    compile_program,
    install_helpers,
    is_async,
    run_async,
    run_sync,
    source_lines,
)
from runtime._replay import prepare_replay
from runtime._report import CountingFile, Reporter
from runtime._wire import Compiled, Prepare, Ready, Start, State

__all__ = ("ChildSetup", "Prepared", "child_main", "run_child")

_PR_SET_PDEATHSIG = 1
_PR_SET_CHILD_SUBREAPER = 36
_PR_SET_NO_NEW_PRIVS = 38
_libc = ctypes.CDLL(None, use_errno=True)


@dataclass(frozen=True)
class ChildSetup:
    """What the template settled for every child it forks (see ``runtime._settle``)."""

    isolation: str  # "namespaces" or "process"
    seccomp: bytes  # the filter each child loads (b"": none, or the template loaded it)
    #: The template gave up for its children what each would (a root host, with a read-only
    #: view): a child is one process that joins its cgroups, takes its uid, applies Landlock.
    prepared: bool = False
    #: Each run has a uid of its own (the host sends it with the fork request).
    per_run_uid: bool = False


class BindingNamespace:
    """A namespace object for dotted bindings (``tools.read_file``)."""

    def __init__(self, name: str) -> None:
        self.__dict__["_dsh_name"] = name

    def _names(self) -> list[str]:
        return sorted(k for k in self.__dict__ if not k.startswith("_dsh"))

    def __getattr__(self, name: str) -> Any:
        names = self._names()
        close = difflib.get_close_matches(name, names, n=3)
        hint = f" Did you mean {', '.join(close)}?" if close else ""
        listed = ", ".join(names) if len(names) <= 40 else ", ".join(names[:40]) + ", …"
        error = AttributeError(
            f"{self.__dict__['_dsh_name']} has no binding {name!r}.{hint} "
            f"It has: {listed or 'none'}."
        )
        error.name, error.obj = name, None  # no second "Did you mean" from the traceback
        raise error

    def __dir__(self) -> list[str]:
        return self._names()

    def __repr__(self) -> str:
        return f"<bindings {self.__dict__['_dsh_name']}: {', '.join(self._names())}>"


def _install_bindings(
    namespace: dict[str, Any], names: list[str], bridge: Bridge, style: CallStyle
) -> None:
    for name in names:
        *path, leaf = name.split(".")
        holder: dict[str, Any] = namespace
        prefix = ""
        for part in path:
            prefix = f"{prefix}.{part}" if prefix else part
            existing = holder.get(part)
            if not isinstance(existing, BindingNamespace):
                existing = BindingNamespace(prefix)
                holder[part] = existing
            holder = existing.__dict__
        holder[leaf] = make_binding(bridge, name, style)


def _contain(
    ctl_in: int, ctl_out: int, log_w: int, parent: int, join: list[int], where_w: int = -1
) -> None:
    """Session, death signal, no_new_privs, subreaper, fds 0/1/2, the run's cgroups, and
    nothing else inherited."""
    os.setsid()
    _die_with(parent)
    _libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
    _libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    signal.set_wakeup_fd(-1)
    for sig in (signal.SIGCHLD, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.dup2(log_w, 1)
    os.dup2(log_w, 2)
    for fd in join:  # before any fork, so every process of the run is in the run's cgroups
        os.write(fd, b"0")
        os.close(fd)
    _close_fds_except({0, 1, 2, ctl_in, ctl_out, where_w})
    os.set_inheritable(ctl_in, False)
    os.set_inheritable(ctl_out, False)
    if where_w >= 0:  # never blocks a dump, and no program it execs has it
        os.set_inheritable(where_w, False)
        os.set_blocking(where_w, False)


def _die_with(parent: int) -> None:
    """SIGKILL when our parent dies; exit now if it already has (the signal is reset by a
    change of ids, so this is said again after one). As PID 1 of a new PID namespace our
    parent is outside it: ``getppid()`` reads 0 (``parent`` 0 says so)."""
    _libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent:
        os._exit(1)


def _close_fds_except(keep: set[int]) -> None:
    # Listing our fds beats closerange() over the whole RLIMIT_NOFILE range (20k syscalls).
    for name in os.listdir("/proc/self/fd"):
        fd = int(name)
        if fd not in keep:
            try:
                os.close(fd)
            except OSError:
                pass


def _close_all(fds: tuple[int, ...]) -> None:
    for fd in fds:
        try:
            os.close(fd)
        except OSError:
            pass


def _leave_as(status: int) -> None:
    """Exit the way a process with wait status ``status`` did (signal or exit code)."""
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        if sig not in (signal.SIGKILL, signal.SIGSTOP):  # those have no handler to reset
            signal.signal(sig, signal.SIG_DFL)
        os.kill(os.getpid(), sig)
    os._exit(os.waitstatus_to_exitcode(status) & 0xFF)


def _supervise(init: int, report_r: int, fds: tuple[int, ...]) -> None:
    """Outside the namespaces: wait for their init, then leave as the program's process left."""
    # The run's pipes belong to the program's process alone: its exit is their EOF. (Not
    # found by listing /proc/self/fd: init remounts /proc for its namespace.)
    _close_all(fds)
    signal.signal(signal.SIGXCPU, signal.SIG_IGN)  # the host's ask at a budget is the program's
    while True:
        try:
            _, status = os.waitpid(init, 0)
            break
        except ChildProcessError:
            os._exit(0)
        except InterruptedError:
            continue
    report = os.read(report_r, 4)  # the program's own wait status, from init
    _leave_as(struct.unpack("!i", report)[0] if len(report) == 4 else status)


def _init(runner: int, report_w: int, fds: tuple[int, ...]) -> None:
    """PID 1 of the run's namespace: reap everything; when the program's process ends, pass
    its status out and end (which ends every process in the namespace)."""
    _close_all(fds)
    while True:
        try:
            pid, status = os.wait()
        except ChildProcessError:
            os._exit(0)
        except InterruptedError:
            continue
        if pid == runner:
            os.write(report_w, struct.pack("!i", status))
            os._exit(0)


def _enter_namespaces(fds: tuple[int, ...]) -> None:
    """New namespaces (a user namespace first), then two forks: a supervisor outside, an
    init (PID 1) inside, and the program's process (PID 2) under it. The program is not PID
    1, so signals it sends itself act as anywhere else."""
    report_r, report_w = os.pipe2(os.O_CLOEXEC)
    enter_namespaces()
    init = os.fork()
    if init:
        os.close(report_w)
        _supervise(init, report_r, fds)
    os.close(report_r)
    # Our parent is outside our PID namespace (getppid() is 0 here), so it cannot be checked
    # as in _contain; if it died before this line, the template sweeps us up as an orphan.
    _libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    make_mounts_private()
    make_root_read_only()
    hide_cgroups()
    mount_proc()
    runner = os.fork()
    if runner:
        _init(runner, report_w, fds)
    os.close(report_w)
    _libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != 1:
        os._exit(1)


def _enter_workdir(prepare: Prepare, reporter: Reporter) -> None:
    """Move into the run's directory, confined to it (Landlock), with the limits that do not
    depend on the program."""
    reporter.linger_after = prepare.linger
    os.chdir(prepare.workdir)
    landlock(prepare.workdir)
    resource.setrlimit(resource.RLIMIT_FSIZE, (prepare.file_bytes, prepare.file_bytes))
    resource.setrlimit(resource.RLIMIT_NOFILE, (prepare.open_files, prepare.open_files))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    if prepare.max_processes:  # counted per uid: the run's own
        resource.setrlimit(resource.RLIMIT_NPROC, (prepare.max_processes, prepare.max_processes))


def _prepare(prepare: Prepare, setup: ChildSetup, reporter: Reporter) -> None:
    """Per child (no prepared template): contain it in its run's directory (at the
    namespaces level a tmpfs of its own), then give up every privilege."""
    if setup.isolation == "namespaces":
        mount_workdir(prepare.workdir, prepare.file_bytes, os.geteuid(), os.getegid())
    _enter_workdir(prepare, reporter)
    drop_bounding_set()
    clear_capabilities()
    load_seccomp(setup.seccomp)


def _data_bytes() -> int:
    """The data segment this child uses now (the heap cap is counted above it)."""
    try:
        with open("/proc/self/statm", "rb") as f:
            return int(f.read().split()[5]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, IndexError, ValueError):
        return 0


def _set_limits(start: Start, data_base: int) -> None:
    """The program's own limits: heap (above what the child used before it) and CPU (a
    backstop that cannot be blocked: SIGKILL a little past the budget)."""
    heap = data_base + start.heap_bytes
    resource.setrlimit(resource.RLIMIT_DATA, (heap, heap))
    seconds = -(-start.compute_ns // 1_000_000_000) + 2
    resource.setrlimit(resource.RLIMIT_CPU, (seconds, seconds))


def _dump_stacks_at_budgets(where_w: int) -> None:
    """On SIGXCPU (our CPU timer at the compute budget, or the host's at any budget, just
    before its kill) write every thread's stack to ``where_w``, at C level (a loop in C that
    holds the interpreter does not delay it), then die of the signal as before."""
    if where_w >= 0:
        faulthandler.register(signal.SIGXCPU, file=where_w, all_threads=True, chain=True)
        # Our timer, the template and the host's watchdog may each ask: one arriving
        # mid-dump waits for it (then dumps again, and the default action ends the process).
        defer_repeats(signal.SIGXCPU)


def _streams() -> None:
    sys.stdin = io.TextIOWrapper(io.FileIO(0, "r", closefd=False), encoding="utf-8")
    sys.stdout = io.TextIOWrapper(
        CountingFile(1), encoding="utf-8", errors="backslashreplace", write_through=True
    )
    sys.stderr = io.TextIOWrapper(
        CountingFile(2), encoding="utf-8", errors="backslashreplace", write_through=True
    )
    # the originals point at fds we closed; print(file=sys.__stderr__) must still log
    setattr(sys, "__stdout__", sys.stdout)  # noqa: B010 - the attribute is Final to mypy
    setattr(sys, "__stderr__", sys.stderr)  # noqa: B010
    sys.argv = [FILENAME]


@dataclass(frozen=True)
class Prepared:
    """A child set up and its program received: what ``run_child`` runs."""

    code: types.CodeType
    namespace: dict[str, Any]
    bridge: Bridge
    reporter: Reporter


def child_main(
    ctl_in: int,
    ctl_out: int,
    log_w: int,
    parent: int,
    setup: ChildSetup,
    join: list[int],
    uid: int | None,
    where_w: int = -1,
) -> Prepared:
    """Set this freshly forked process up and wait for its program; exits if it cannot.

    ``join`` are ``cgroup.procs`` files (open for writing) of the run's cgroups; ``uid`` the
    run's own (None: keep ours, without capabilities).

    Everything that does not depend on the program happens before the child waits for
    its ``Start`` frame, so a child forked ahead of time has done it already.
    """
    try:
        _contain(ctl_in, ctl_out, log_w, parent, join, where_w)
        if setup.prepared:
            if uid is not None:
                become(uid, uid)
                _die_with(parent)  # cleared by the change of ids
            else:
                clear_capabilities()
        else:
            join_new_session_keyring()
            if setup.isolation == "namespaces":
                _enter_namespaces((0, 1, 2, ctl_in, ctl_out, where_w))
        bridge = Bridge(ctl_in, ctl_out)
        reporter = Reporter(bridge)
        bridge.fail = reporter.fail
        prepare: Prepare = bridge.read_first(Prepare)
        if setup.prepared:
            _enter_workdir(prepare, reporter)
        else:
            _prepare(prepare, setup, reporter)
        if prepare.exec_argv:
            exec_engine(prepare, ctl_in, ctl_out)
        _streams()
        install_helpers(builtins)
        builtins.ToolCallError = ToolCallError  # type: ignore[attr-defined]  # a builtin: globals() stay the program's
        ToolCallError.__module__ = "builtins"  # a traceback says `ToolCallError`, as for a builtin
        if prepare.warm_up:
            _warm_up(bridge)
        data_base = _data_bytes()  # what the program's inputs and code take counts as heap
        bridge.send(Ready())
        start: Start = bridge.read_first(Start)  # a child forked ahead of time waits here
        reporter.max_output = start.max_output_bytes
        prepare_replay(start, bridge, reporter)
        reporter.max_heap_mb = start.heap_bytes >> 20
        namespace = _program_module(start, bridge, reporter)
        if start.keep_state:
            reporter.send_state = functools.partial(_send_state, start, namespace, reporter)
            if start.state_on_failure:
                reporter.send_failed_state = functools.partial(
                    _send_state, start, namespace, reporter, strict=False
                )
        if start.code:
            code = marshal.loads(start.code)
        else:  # a long program: the host left compiling it to us, off its event loop
            try:
                code = compile_program(start.source, start.policy)
            except ProgramRejected as exc:
                reporter.fail(
                    "parse", exc.message, lineno=exc.lineno, exception_type=exc.exception_type
                )
                raise
            # Before the program runs: a `parse` report after this one is a forgery.
            bridge.send(Compiled())
        linecache.cache[FILENAME] = (
            len(start.source),
            None,
            source_lines(start.source),
            FILENAME,
        )
        _set_limits(start, data_base)
        _dump_stacks_at_budgets(where_w)
        start_cpu_timer(start.compute_ns)
    except BaseException as exc:  # our own set-up failed: say so, as a death the host can see
        os.write(
            2,
            f"dsh-code child set-up failed: {type(exc).__name__}: {exc}\n".encode(errors="replace")[
                :2000
            ],
        )
        os._exit(70)
    return Prepared(code, namespace, bridge, reporter)


def _program_module(
    start: Start, bridge: Bridge, reporter: Reporter | None = None
) -> dict[str, Any]:
    """The program's ``__main__``: a fresh module, as ``python prog.py`` would have (with a
    session's state restored in it first)."""
    module = types.ModuleType("__main__")
    namespace = module.__dict__
    namespace.update(__file__=FILENAME, __builtins__=builtins, __cached__=None)
    sys.modules["__main__"] = module
    if start.state and reporter is not None:
        from runtime._state import restore

        try:
            restore(start.state, namespace)
        except Exception as exc:
            reporter.fail(
                "state",
                "the session's state cannot be restored in this run: "
                f"{type(exc).__name__}: {exc} (the session keeps its last good state)",
            )
    namespace.update(start.inputs)
    _install_bindings(namespace, start.bindings, bridge, start.call_style)
    if start.policy == "restricted":
        from runtime._restricted import restricted_globals

        namespace.update(restricted_globals())  # last: no input may shadow a guard hook
        install_helpers(namespace["__builtins__"])
        namespace["__builtins__"]["ToolCallError"] = ToolCallError
    return namespace


def _send_state(
    start: Start, namespace: dict[str, Any], reporter: Reporter, *, strict: bool = True
) -> None:
    """Save the program's globals (not its bindings) and send them to the host; a state that
    cannot be saved fails the run (``strict``) or is not sent (a failed run's: the session
    keeps its last state)."""
    from runtime._state import StateTooLarge, save

    roots = {name.split(".", 1)[0] for name in start.bindings}
    try:
        blob, dropped = save(namespace, skip=roots, max_bytes=start.max_state_bytes)
    except Exception as exc:  # too big, or the program's objects raised while being pickled
        if not strict:
            return
        if isinstance(exc, StateTooLarge):
            reporter.fail("state", str(exc))
        reporter.fail(
            "state", f"the session's state could not be saved: {type(exc).__name__}: {exc}"
        )
    names = sorted(
        k
        for k in namespace
        if not (k.startswith("__") and k.endswith("__")) and k not in roots and k not in dropped
    )
    reporter.bridge.send(State(blob=blob, names=names, dropped=dropped))


#: A program that walks the paths a real one walks (compiled once, in the template).
_WARM_PROGRAM = marshal.dumps(compile_program("x = [1, 2.5, None, 'a', {'k': True}]\nx"))
_WARM_START = Start(
    code=_WARM_PROGRAM,
    source="",
    policy="python",
    call_style="async",
    inputs={"n": 1},
    bindings=["tools.warm"],
    max_output_bytes=0,
    heap_bytes=0,
    compute_ns=0,
)


def _warm_up(bridge: Bridge) -> None:
    """Run a throwaway program before the real one arrives.

    Running one writes to memory the child shares with the template (reference counts,
    interpreter state); each page written is copied first (~3 µs a page on our 2-core VM).
    A child forked ahead of time pays for those copies while it waits, not the caller.
    """
    namespace = _program_module(_WARM_START, bridge)
    value = run_sync(marshal.loads(_WARM_START.code), namespace)
    Reporter.encode_probe(value)


def _allow_nested_asyncio_run() -> None:
    """A program that awaits at its top level runs on our loop; its own ``asyncio.run()``
    (what scripts end with) then runs on a thread with its own loop, as if ours were not."""
    original = asyncio.runners.run

    @functools.wraps(original)
    def run(main: Any, **kwargs: Any) -> Any:
        if asyncio.events._get_running_loop() is None:
            return original(main, **kwargs)
        outcome: dict[str, Any] = {}

        def target() -> None:
            try:
                outcome["value"] = original(main, **kwargs)
            except BaseException as exc:
                outcome["error"] = exc

        thread = threading.Thread(target=target, name="asyncio.run")
        thread.start()
        thread.join()
        if "error" in outcome:
            raise outcome["error"]
        return outcome["value"]

    asyncio.run = asyncio.runners.run = run


def run_child(prepared: Prepared) -> None:
    """Run the program, report, leave; never returns. Called from the bottom of the stack."""
    code, namespace, reporter = prepared.code, prepared.namespace, prepared.reporter
    prepared.bridge.start()
    ours = dict(builtins.__dict__)  # the report must not run on builtins the program replaced
    try:
        if is_async(code):
            _allow_nested_asyncio_run()
            loop = asyncio.new_event_loop()
            asyncio.set_event_loop(loop)
            value = loop.run_until_complete(run_async(code, namespace))
        else:
            value = run_sync(code, namespace)
    except BaseException as exc:
        builtins.__dict__.update(ours)
        reporter.exception(exc)
    builtins.__dict__.update(ours)
    reporter.result(value)
    os._exit(70)  # not reached: a report leaves
