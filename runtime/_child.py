"""What runs inside the child: set-up after fork, the binding bridge, the program, the report.

Everything here runs in a process the program controls; it trusts nothing from it and
reports through ``ctl_out`` in frames, then leaves with ``os._exit`` (no atexit, no
thread joins: the run settles as soon as the result is known).
"""

from __future__ import annotations

import asyncio
import builtins
import ctypes
import io
import linecache
import marshal
import os
import resource
import signal
import struct
import sys
import traceback
from typing import Any

import msgspec

from runtime._contain import enter_namespaces, landlock, mount_proc, mount_workdir
from runtime._errors import ToolCallError
from runtime._json import json_problem
from runtime._program import (
    ABSENT_NAME,
    ENTRY_NAME,
    LAST_NAME,
    ProgramRejected,
    compile_program,
    entry_point,
)
from runtime._wire import (
    HEADER,
    Call,
    Compiled,
    Done,
    Failed,
    FrameBuffer,
    Prepare,
    Ready,
    Reply,
    ReplyError,
    Start,
    encode_frame,
)

__all__ = ("child_main",)

_PR_SET_PDEATHSIG = 1
_PR_SET_CHILD_SUBREAPER = 36
_PR_SET_NO_NEW_PRIVS = 38
_RUNTIME_DIR = os.path.dirname(os.path.abspath(__file__))
_MAX_REPLY_FRAME = 1 << 31
#: A failure report never grows past this; longer messages are cut (the cap is on the message).
_MAX_MESSAGE = 64 * 1024

_libc = ctypes.CDLL(None, use_errno=True)
_host_decoder = msgspec.json.Decoder(Prepare | Start | Reply | ReplyError)
_raw_encoder = msgspec.json.Encoder()


class _Absent:
    """The program completed without a result."""


_ABSENT = _Absent()


def _last(value: Any) -> Any:
    return _ABSENT if value is None else value


class _CountingFile(io.RawIOBase):
    """Raw fd writer that counts bytes: the child's own view of its output budget."""

    written = 0  # class-wide: stdout and stderr share one budget

    def __init__(self, fd: int) -> None:
        self._fd = fd

    def writable(self) -> bool:
        return True

    def fileno(self) -> int:
        return self._fd

    def write(self, data: Any) -> int:
        view = memoryview(data)
        total = len(view)
        while view:
            n = os.write(self._fd, view)
            view = view[n:]
        _CountingFile.written += total
        return total


class _Namespace:
    """A namespace object for dotted bindings (``tools.read_file``)."""

    def __init__(self, name: str) -> None:
        self.__dict__["_dsh_name"] = name

    def __repr__(self) -> str:
        names = sorted(k for k in self.__dict__ if not k.startswith("_dsh"))
        return f"<bindings {self.__dict__['_dsh_name']}: {', '.join(names)}>"


class _Bridge:
    """The child's end of the binding bridge: sends Call frames, resolves futures on replies."""

    def __init__(self, ctl_in: int, ctl_out: int) -> None:
        self.fd_in = ctl_in
        self.fd_out = ctl_out

        self._out = ctl_out
        self._next_id = 0
        self._pending: dict[int, asyncio.Future[Any]] = {}
        self._frames = FrameBuffer(_MAX_REPLY_FRAME)
        self._early: list[bytes] = []  # frames read with the one asked for (Start after Prepare)

    def read_first(self, kind: type[msgspec.Struct]) -> Any:
        """Block until the host's next frame, which must be a ``kind``; exit if it is not
        (the host breaks the protocol only if it is gone or broken)."""
        while not self._early:
            data = os.read(self.fd_in, 1 << 20)
            if not data:
                os._exit(0)
            self._early += self._frames.feed(data)
        message = _host_decoder.decode(self._early.pop(0))
        if not isinstance(message, kind):
            os._exit(3)
        return message

    def send(self, message: msgspec.Struct) -> None:
        _write_all(self._out, encode_frame(message))

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        os.set_blocking(self.fd_in, False)
        loop.add_reader(self.fd_in, self._on_readable)

    def _on_readable(self) -> None:
        try:
            data = os.read(self.fd_in, 1 << 20)
        except BlockingIOError:
            return
        if not data:  # the host went away: nothing can answer us any more
            _exit_now(0)
        bodies, self._early = self._early + self._frames.feed(data), []
        for body in bodies:
            message = _host_decoder.decode(body)
            future = self._pending.pop(getattr(message, "id", -1), None)
            if future is None or future.done():
                continue
            if isinstance(message, Reply):
                future.set_result(message.value)
            elif isinstance(message, ReplyError):
                future.set_exception(ToolCallError(message.tool, message.message, message.code))

    async def call(self, name: str, args: Any) -> Any:
        try:
            problem = json_problem(args)
        except BaseException as exc:  # the program's own objects raised while being checked
            problem = f"checking them raised {type(exc).__name__}"
        if problem is not None:
            _fail(
                "invalid_completion",
                f"the arguments of binding {name} are not lossless JSON: {problem}",
            )
        self._next_id += 1
        call_id = self._next_id
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._pending[call_id] = future
        self.send(Call(id=call_id, name=name, args=args))
        return await future


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


_bridge: _Bridge | None = None
_max_output = 0
_linger_after_report = True


class _FlushTimeout(BaseException):
    """A flush of the program's streams took too long (raised by our SIGALRM handler)."""


#: How long the program's own streams may take to flush before the report goes anyway.
_FLUSH_S = 0.05


def _flush_streams() -> None:
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except _FlushTimeout:
            raise
        except BaseException:  # the program may have replaced or broken them
            pass


def _stop_flushing(signum: int, frame: object) -> None:
    raise _FlushTimeout


def _flush_before_report() -> None:
    """Flush what the program left buffered, as the host kills the run once it reads the
    report; bounded, so a flush the program made hang does not hold the report back."""
    try:
        signal.signal(signal.SIGALRM, _stop_flushing)
        signal.setitimer(signal.ITIMER_REAL, _FLUSH_S)
        try:
            _flush_streams()
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
    except BaseException:  # _FlushTimeout, or the program broke signal handling
        pass


def _exit_now(code: int) -> None:
    _flush_streams()
    os._exit(code)


def _linger() -> None:
    """After the report: wait to be killed, so the host finds every descendant under us.

    We are the subreaper of whatever the program started; exiting now would hand those
    processes to the template. The host kills the whole tree at once, or closes the
    bridge (EOF), and then we leave. When the run's cgroup holds every process of the run
    (``Prepare.linger`` is False) we leave at once instead: our exit, which takes a while
    (freeing our memory), then overlaps the host's handling of the report.
    """
    if not _linger_after_report:
        os._exit(0)  # the streams were flushed before the report
    _flush_streams()
    assert _bridge is not None
    try:
        os.close(_bridge.fd_out)  # EOF after the report: a report that was lost shows as a death
    except OSError:
        pass
    try:
        os.set_blocking(_bridge.fd_in, True)
        while os.read(_bridge.fd_in, 1 << 16):
            pass
    except BaseException:
        pass
    os._exit(0)


def _fail(
    kind: str,
    message: str,
    *,
    exception_type: str | None = None,
    tb: str | None = None,
    lineno: int | None = None,
) -> None:
    """Report a failure to the host and leave at once."""
    remaining = max(_max_output - _CountingFile.written, 0)
    if len(message) > _MAX_MESSAGE or len(message) + len(tb or "") > remaining:
        if kind == "exception" and len(message) + len(tb or "") > remaining:
            kind = "output_limit"
            message = (
                f"the program raised {exception_type}, and its diagnostic "
                f"({len(message)} characters) would pass max_output_bytes ({_max_output})"
            )
            tb = None
        else:
            message = message[: _MAX_MESSAGE - 20] + "… [truncated]"
            tb = tb[-_MAX_MESSAGE:] if tb else tb
    assert _bridge is not None
    _flush_before_report()
    _bridge.send(
        Failed(
            kind=kind, message=message, exception_type=exception_type, traceback=tb, lineno=lineno
        )
    )
    _linger()


def _is_ours(filename: str) -> bool:
    return os.path.dirname(os.path.abspath(filename)) == _RUNTIME_DIR or filename.startswith(
        os.path.join(os.path.dirname(asyncio.__file__), "")
    )


def _strip_frames(te: traceback.TracebackException) -> None:
    seen: set[int] = set()
    todo = [te]
    while todo:
        item = todo.pop()
        if id(item) in seen:
            continue
        seen.add(id(item))
        frames = [f for f in item.stack if not _is_ours(f.filename)]
        item.stack = traceback.StackSummary.from_list(frames)
        todo.extend(x for x in (item.__cause__, item.__context__) if x is not None)
        todo.extend(getattr(item, "exceptions", None) or [])


def _report_exception(exc: BaseException) -> None:
    if isinstance(exc, MemoryError):
        _fail("memory", "MemoryError: the program passed the heap cap (max_heap_mb)")
    te = traceback.TracebackException.from_exception(exc, limit=-50, compact=True)
    _strip_frames(te)
    text = "".join(te.format())
    lineno = next((f.lineno for f in reversed(te.stack) if f.filename == "<program>"), None)
    _fail(
        "exception",
        text.rstrip("\n"),
        exception_type=type(exc).__qualname__.removeprefix(f"{ENTRY_NAME}.<locals>."),
        tb=text.rstrip("\n"),
        lineno=lineno,
    )


def _install_bindings(namespace: dict[str, Any], names: list[str], bridge: _Bridge) -> None:
    for name in names:
        *path, leaf = name.split(".")
        target: Any = namespace
        prefix = ""
        for part in path:
            prefix = f"{prefix}.{part}" if prefix else part
            holder = target if isinstance(target, dict) else target.__dict__
            existing = holder.get(part)
            if not isinstance(existing, _Namespace):
                existing = _Namespace(prefix)
                holder[part] = existing
            target = existing
        holder = target if isinstance(target, dict) else target.__dict__
        holder[leaf] = _make_binding(name, bridge)


def _make_binding(name: str, bridge: _Bridge) -> Any:
    async def binding(*args: Any, **kwargs: Any) -> Any:
        if args:
            if len(args) == 1 and not kwargs and type(args[0]) is dict:
                return await bridge.call(name, args[0])
            raise TypeError(f"{name}() takes keyword arguments (or one dict of them)")
        return await bridge.call(name, kwargs)

    binding.__name__ = binding.__qualname__ = name.rsplit(".", 1)[-1]
    return binding


def _prepare(prepare: Prepare, isolation: str) -> None:
    """Contain this child in its run's directory and set the limits that do not depend on
    the program."""
    global _linger_after_report
    _linger_after_report = prepare.linger
    if isolation == "namespaces":
        mount_workdir(prepare.workdir, prepare.file_bytes)
    os.chdir(prepare.workdir)
    landlock(prepare.workdir)
    resource.setrlimit(resource.RLIMIT_FSIZE, (prepare.file_bytes, prepare.file_bytes))
    resource.setrlimit(resource.RLIMIT_NOFILE, (prepare.open_files, prepare.open_files))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def _data_bytes() -> int:
    """The data segment this child uses now (the heap cap is counted above it)."""
    try:
        with open("/proc/self/statm", "rb") as f:
            return int(f.read().split()[5]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, IndexError, ValueError):
        return 0


def _set_limits(start: Start, data_base: int) -> None:
    """The program's own limits: heap (above what the child used before it) and CPU."""
    heap = data_base + start.heap_bytes
    resource.setrlimit(resource.RLIMIT_DATA, (heap, heap))
    resource.setrlimit(resource.RLIMIT_CPU, (start.cpu_seconds, start.cpu_seconds + 1))


def _close_fds_except(keep: set[int]) -> None:
    # Listing our fds beats closerange() over the whole RLIMIT_NOFILE range (20k syscalls).
    for name in os.listdir("/proc/self/fd"):
        fd = int(name)
        if fd not in keep:
            try:
                os.close(fd)
            except OSError:
                pass


def _contain(ctl_in: int, ctl_out: int, log_w: int, parent: int, join: list[int]) -> None:
    """Session, death signal, no_new_privs, subreaper, fds 0/1/2, the run's cgroups, and
    nothing else inherited."""
    os.setsid()
    _libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent:  # the template died between fork and prctl
        os._exit(1)
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
    _close_fds_except({0, 1, 2, ctl_in, ctl_out})
    os.set_inheritable(ctl_in, False)
    os.set_inheritable(ctl_out, False)


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
    """New namespaces, then two forks: a supervisor outside, an init (PID 1) inside, and the
    program's process (PID 2) under it. The program is not PID 1, so signals it sends itself
    act as anywhere else."""
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
    mount_proc()
    runner = os.fork()
    if runner:
        _init(runner, report_w, fds)
    os.close(report_w)
    _libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != 1:
        os._exit(1)


def child_main(
    ctl_in: int, ctl_out: int, log_w: int, parent: int, isolation: str, join: list[int]
) -> None:
    """Run one program in this freshly forked process; never returns.

    ``join`` are ``cgroup.procs`` files (open for writing) of the run's cgroups.

    Everything that does not depend on the program happens before the child waits for
    its ``Start`` frame, so a child forked ahead of time has done it already.
    """
    global _bridge, _max_output
    try:
        _contain(ctl_in, ctl_out, log_w, parent, join)
        if isolation == "namespaces":
            _enter_namespaces((0, 1, 2, ctl_in, ctl_out))
        _bridge = bridge = _Bridge(ctl_in, ctl_out)
        prepare: Prepare = bridge.read_first(Prepare)
        _prepare(prepare, isolation)
        sys.stdin = io.TextIOWrapper(io.FileIO(0, "r", closefd=False), encoding="utf-8")
        sys.stdout = io.TextIOWrapper(
            _CountingFile(1), encoding="utf-8", errors="backslashreplace", write_through=True
        )
        sys.stderr = io.TextIOWrapper(
            _CountingFile(2), encoding="utf-8", errors="backslashreplace", write_through=True
        )
        # the originals point at fds we closed; print(file=sys.__stderr__) must still log
        setattr(sys, "__stdout__", sys.stdout)  # noqa: B010 - the attribute is Final to mypy
        setattr(sys, "__stderr__", sys.stderr)  # noqa: B010
        sys.argv = ["<program>"]
        loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)
        if prepare.warm_up:
            _warm_up(loop, bridge)
        data_base = _data_bytes()  # what the program's inputs and code take counts as heap
        bridge.send(Ready())
        start: Start = bridge.read_first(Start)  # a child forked ahead of time waits here
        _max_output = start.max_output_bytes
        namespace = _program_namespace(start, bridge)
        if start.code:
            code = marshal.loads(start.code)
        else:  # a long program: the host left compiling it to us, off its event loop
            try:
                code = compile_program(start.source, start.policy)  # type: ignore[arg-type]
            except ProgramRejected as exc:
                _fail("parse", exc.message, lineno=exc.lineno)
                raise
            # Before the program runs: a `parse` report after this one is a forgery.
            bridge.send(Compiled())
        func = entry_point(code, namespace)
        linecache.cache["<program>"] = (
            len(start.source),
            None,
            start.source.splitlines(keepends=True),
            "<program>",
        )
        _set_limits(start, data_base)
    except BaseException as exc:  # our own set-up failed: say so, as a death the host can see
        os.write(
            2, f"dsh-code child set-up failed: {exc!r} {getattr(exc, 'strerror', '')}\n".encode()
        )
        os._exit(70)
    _run(loop, func, bridge)


#: A program that walks the paths a real one walks (compiled once, in the template).
_WARM_PROGRAM = marshal.dumps(compile_program("x = [1, 2.5, None, 'a', {'k': True}]\nreturn x"))
_WARM_START = Start(
    code=_WARM_PROGRAM,
    source="",
    policy="python",
    inputs={"n": 1},
    bindings=["tools.warm"],
    max_output_bytes=0,
    heap_bytes=0,
    cpu_seconds=0,
)


def _warm_up(loop: asyncio.AbstractEventLoop, bridge: _Bridge) -> None:
    """Run a throwaway program before the real one arrives.

    Running one writes to memory the child shares with the template (reference counts,
    interpreter and asyncio state); each page written is copied first (~3 µs a page on
    our 2-core VM). A child forked ahead of time pays for those copies while it waits,
    not while the caller does.
    """
    func = entry_point(marshal.loads(_WARM_START.code), _program_namespace(_WARM_START, bridge))
    value = loop.run_until_complete(func())
    json_problem(value)
    encode_frame(Done(has_value=True, value=msgspec.Raw(_raw_encoder.encode(value))))


def _program_namespace(start: Start, bridge: _Bridge) -> dict[str, Any]:
    namespace: dict[str, Any] = {
        "__name__": "__main__",
        "__builtins__": builtins,
        LAST_NAME: _last,
        ABSENT_NAME: _ABSENT,
        "ToolCallError": ToolCallError,
    }
    namespace.update(start.inputs)
    _install_bindings(namespace, start.bindings, bridge)
    if start.policy == "restricted":
        from runtime._restricted import restricted_globals

        namespace.update(restricted_globals())  # last: no input may shadow a guard hook
    return namespace


def _run(loop: asyncio.AbstractEventLoop, func: Any, bridge: _Bridge) -> None:
    bridge.start(loop)
    try:
        value = loop.run_until_complete(func())
    except BaseException as exc:
        _report_exception(exc)
        return
    if value is _ABSENT:
        _flush_before_report()
        bridge.send(Done(has_value=False, value=msgspec.Raw(b"null")))
        _linger()
    try:
        problem = json_problem(value)
        raw = b"" if problem is not None else _raw_encoder.encode(value)
    except BaseException as exc:  # the value's own code ran (a key's __eq__, ...) and failed
        problem = f"checking it raised {type(exc).__name__}"
    if problem is not None:
        _fail("invalid_completion", f"the result is not lossless JSON: {problem}")
    if _CountingFile.written + len(raw) > _max_output:
        _fail(
            "output_limit",
            f"the result ({len(raw)} bytes of JSON) after {_CountingFile.written} bytes of logs "
            f"would pass max_output_bytes ({_max_output})",
        )
    _flush_before_report()
    bridge.send(Done(has_value=True, value=msgspec.Raw(raw)))
    _linger()


assert HEADER.size == 4
