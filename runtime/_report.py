"""How the child reports: the program's output counted, its result or failure in one frame,
every byte of it held to ``max_output_bytes``, then the child leaves at once."""

from __future__ import annotations

import asyncio
import io
import os
import signal
import sys
import traceback
from typing import Any, NoReturn

import msgspec

from runtime._json import JsonTooLarge, bare_repr, json_problem
from runtime._program import ABSENT, FILENAME, HIDDEN_FILENAME, Bare
from runtime._wire import ChildFailureKind, Done, Failed

__all__ = ("CountingFile", "Reporter")

#: A failure report's text never grows past this (the rest is cut), whatever the cap.
_MAX_MESSAGE = 64 * 1024
#: An exception's type name is cut to this.
_MAX_TYPE_NAME = 200
#: How long the program's own streams may take to flush before the report goes anyway.
_FLUSH_S = 0.05
_RUNTIME_DIR = os.path.dirname(os.path.abspath(__file__))
_ASYNCIO_DIR = os.path.join(os.path.dirname(asyncio.__file__), "")
_encoder = msgspec.json.Encoder()


class CountingFile(io.RawIOBase):
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
        CountingFile.written += total
        return total


class _FlushTimeout(BaseException):
    """A flush of the program's streams took too long (raised by our SIGALRM handler)."""


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


def _is_ours(filename: str) -> bool:
    if filename == HIDDEN_FILENAME:
        return True
    return os.path.dirname(os.path.abspath(filename)) == _RUNTIME_DIR or filename.startswith(
        _ASYNCIO_DIR
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


#: ``type.__qualname__`` itself: a metaclass cannot intercept it.
_QUALNAME = type.__dict__["__qualname__"]


def _type_name(exc: BaseException) -> str:
    name: str = _QUALNAME.__get__(type(exc))
    return name if len(name) <= _MAX_TYPE_NAME else name[: _MAX_TYPE_NAME - 1] + "…"


class Reporter:
    """The child's one report: ``Done`` or ``Failed``, each sent once, then we leave."""

    def __init__(self, bridge: Any) -> None:
        self._bridge = bridge
        self.bridge = bridge
        self._send = bridge.send
        self.max_output = 0
        self.max_heap_mb = 0
        self.linger_after = True
        #: A session run: saves the program's globals and sends them, just before ``Done``.
        self.send_state: Any = None
        #: A session that keeps a failed run's names: the same, before an exception's report.
        self.send_failed_state: Any = None
        #: A resumed run: fails it if the program skipped a call the journal recorded.
        self.before_done: Any = None

    @staticmethod
    def encode_probe(value: Any) -> None:
        """Walk the paths a result takes (for a warm-up)."""
        if isinstance(value, Bare):
            value = value.value
        json_problem(value, max_bytes=1 << 20)
        _encoder.encode(Done(has_value=True, value=msgspec.Raw(_encoder.encode(value))))

    def _linger(self) -> NoReturn:
        """After the report: leave, or wait to be killed so the host finds every descendant
        under us.

        We are the subreaper of whatever the program started; exiting now would hand those
        processes to the template. The host kills the whole tree at once, or closes the
        bridge (EOF), and then we leave. When the run's cgroup holds every process of the run
        (``Prepare.linger`` is False) we leave at once instead: our exit, which takes a while
        (freeing our memory), then overlaps the host's handling of the report.
        """
        if not self.linger_after:
            os._exit(0)  # the streams were flushed before the report
        _flush_streams()
        try:
            os.close(self._bridge.fd_out)  # EOF after the report: a lost report shows as a death
        except OSError:
            pass
        try:
            os.set_blocking(self._bridge.fd_in, True)
            while os.read(self._bridge.fd_in, 1 << 16):
                pass
        except BaseException:
            pass
        os._exit(0)

    def _remaining(self) -> int:
        return max(self.max_output - CountingFile.written, 0)

    def flush(self) -> None:
        """Flush what the program left buffered (the host kills the run once it reads the
        report); bounded, so a flush the program made hang does not hold the report back."""
        try:
            signal.signal(signal.SIGALRM, _stop_flushing)
            signal.setitimer(signal.ITIMER_REAL, _FLUSH_S)
            try:
                _flush_streams()
            finally:
                signal.setitimer(signal.ITIMER_REAL, 0)
        except BaseException:  # _FlushTimeout, or the program broke signal handling
            pass

    def fail(
        self,
        kind: ChildFailureKind,
        message: str,
        *,
        exception_type: str | None = None,
        tb: str | None = None,
        lineno: int | None = None,
    ) -> NoReturn:
        """Report a failure and leave. Every byte of it (type, message, traceback) counts
        against the output cap: past it, the failure is an ``output_limit`` of fixed size."""
        if kind in ("exception", "invalid_completion") and self.send_failed_state is not None:
            send, self.send_failed_state = self.send_failed_state, None
            try:
                send()  # the names assigned before the failure, when the session keeps them
            except BaseException:  # the program's objects broke pickling: the old state stays
                pass
        self.flush()
        size = len(message) + len(tb or "") + len(exception_type or "")
        if size > self._remaining() and kind != "output_limit":
            what = f"raised {exception_type}" if exception_type else f"failed ({kind})"
            message = (
                f"the program {what}, and the report ({size} characters) would pass "
                f"max_output_bytes ({self.max_output}) after {CountingFile.written} "
                "bytes of logs"
            )
            kind, exception_type, tb = "output_limit", None, None
        if len(message) > _MAX_MESSAGE:
            message = message[: _MAX_MESSAGE - 20] + "… [truncated]"
        if tb is not None and len(tb) > _MAX_MESSAGE:
            tb = "… [truncated]" + tb[-_MAX_MESSAGE:]
        self._send(
            Failed(
                kind=kind,
                message=message,
                exception_type=exception_type,
                traceback=tb,
                lineno=lineno,
            )
        )
        self._linger()

    def exception(self, exc: BaseException) -> NoReturn:
        """Report what the program raised, in the program's own line numbers."""
        if isinstance(exc, MemoryError):
            self.fail(
                "memory",
                f"MemoryError: the program passed the heap cap of {self.max_heap_mb} MiB "
                "(max_heap_mb)",
            )
        name = _type_name(exc)
        try:
            te = traceback.TracebackException.from_exception(exc, limit=-50, compact=True)
            _strip_frames(te)
            text = "".join(te.format()).rstrip("\n")
            lineno = next((f.lineno for f in reversed(te.stack) if f.filename == FILENAME), None)
        except BaseException:  # formatting ran the program's code (__str__...) and failed
            text, lineno = f"{name}: <the exception could not be formatted>", None
        self.fail("exception", text, exception_type=name, tb=text, lineno=lineno)

    def result(self, value: Any) -> NoReturn:
        """Report the program's result: lossless JSON within the output cap, in O(cap)."""
        if self.before_done is not None:
            self.before_done()
        if value is ABSENT:
            self._state()
            self.flush()
            self._send(Done(has_value=False, value=msgspec.Raw(b"null")))
            self._linger()
        bare = isinstance(value, Bare)
        if bare:
            value = value.value
        room = self._remaining()
        try:
            problem = json_problem(value, max_bytes=room)
            raw = b"" if problem is not None else _encoder.encode(value)
        except JsonTooLarge:
            self._too_large(room)
        except BaseException as exc:  # the value's own code ran (a key's __eq__, ...) and failed
            problem = f"checking it raised {type(exc).__name__}"
        is_repr = False
        if problem is not None and bare:
            text, problem = bare_repr(value, problem)
            if text is not None:
                raw, problem, is_repr = _encoder.encode(text), None, True
        if problem is not None:
            self.fail("invalid_completion", f"the result is not lossless JSON: {problem}")
        if len(raw) > room:
            self._too_large(room)
        self._state()
        self.flush()
        self._send(Done(has_value=True, value=msgspec.Raw(raw), is_repr=is_repr))
        self._linger()

    def _state(self) -> None:
        if self.send_state is not None:
            self.send_state()

    def _too_large(self, room: int) -> NoReturn:
        logs = min(CountingFile.written, self.max_output)
        before = f" with the {logs} bytes of logs before it" if logs else ""
        self.fail(
            "output_limit",
            f"the result is too big: its JSON passes max_output_bytes ({self.max_output} bytes)"
            + before,
        )
