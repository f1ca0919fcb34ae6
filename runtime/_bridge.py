"""The child's end of the binding bridge: calls from any thread and any event loop.

One pipe each way. Whoever waits for a reply reads: a thread blocked in a plain call polls
the pipe, an event loop with calls pending has it as a reader. Whoever reads delivers each
reply to its waiter (a thread, or a future of some loop). A call's frame is written whole
under a lock; while the pipe to the host is full the writer reads replies too, so a host that
stops reading until its replies drain never deadlocks with us.
"""

from __future__ import annotations

import asyncio
import os
import select
import sys
import threading
import weakref
from collections.abc import Callable, Coroutine, Generator
from typing import Any, Literal, NoReturn

import msgspec

from runtime._errors import tool_call_error
from runtime._json import json_problem
from runtime._wire import (
    Call,
    ChildFailureKind,
    FrameBuffer,
    HostMessage,
    Reply,
    ReplyError,
    encode_frame,
)

__all__ = ("Bridge", "CallStyle", "PendingCall", "make_binding")

_MAX_REPLY_FRAME = 1 << 31
#: A pipe's default capacity: a larger read buffer costs its allocation on every read
#: (1 MiB: ~15 µs per call's reply, 64 KiB: ~1 µs).
_READ_SIZE = 1 << 16
_host_decoder = msgspec.json.Decoder(HostMessage)
CallStyle = Literal["async", "sync"]


class _ThreadWaiter:
    """A thread blocked in a plain call: woken through its eventfd if another party reads."""

    __slots__ = ("done", "error", "thread", "value")

    def __init__(self) -> None:
        self.done = False
        self.value: Any = None
        self.error: BaseException | None = None
        self.thread = threading.get_ident()


class _LoopWaiter:
    """An awaited call: its future belongs to the loop that awaits it."""

    __slots__ = ("future", "loop")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.future: asyncio.Future[Any] = loop.create_future()


def _no_reporter(kind: ChildFailureKind, message: str) -> NoReturn:
    os._exit(70)


def _settle_future(future: asyncio.Future[Any], value: Any, error: BaseException | None) -> None:
    if future.done():
        return
    if error is None:
        future.set_result(value)
    else:
        future.set_exception(error)


class Bridge:
    """Sends ``Call`` frames and matches replies to their waiters, thread- and loop-safe."""

    def __init__(self, ctl_in: int, ctl_out: int) -> None:
        self.fd_in = ctl_in
        self.fd_out = ctl_out
        self._frames = FrameBuffer(_MAX_REPLY_FRAME)
        self._read_ahead: list[
            bytes
        ] = []  # frames read with the one asked for (Start after Prepare)
        self._write_lock = threading.Lock()
        self._read_lock = threading.Lock()
        self._next_id = 0
        self._waiters: dict[int, _ThreadWaiter | _LoopWaiter] = {}
        self._loops: weakref.WeakSet[asyncio.AbstractEventLoop] = weakref.WeakSet()
        self._wake = threading.local()  # a plain-calling thread's eventfd
        #: Reports a run failure and leaves (a call whose arguments are not lossless JSON).
        self.fail: Callable[[ChildFailureKind, str], NoReturn] = _no_reporter
        #: A resumed run's answers to the calls its journal recorded (``runtime._replay``).
        self.replayer: Any = None

    # ---- before the program: blocking reads of the host's frames --------------------------

    def read_first(self, kind: type[msgspec.Struct]) -> Any:
        """Block until the host's next frame, which must be a ``kind``; exit if it is not
        (the host breaks the protocol only if it is gone or broken)."""
        while not self._read_ahead:
            data = os.read(self.fd_in, _READ_SIZE)
            if not data:
                os._exit(0)
            self._read_ahead += self._frames.feed(data)
        message = _host_decoder.decode(self._read_ahead.pop(0))
        if not isinstance(message, kind):
            os._exit(3)
        return message

    def start(self) -> None:
        """From here on, calls are made and replies read without blocking the pipe."""
        os.set_blocking(self.fd_in, False)
        os.set_blocking(self.fd_out, False)

    # ---- sending ----------------------------------------------------------------------------

    def send(self, message: msgspec.Struct) -> None:
        """Write one frame whole (a report, or a call's frame)."""
        frame = encode_frame(message)
        with self._write_lock:
            self._write(frame)

    def _write(self, frame: bytes) -> None:
        view = memoryview(frame)
        while view:
            try:
                view = view[os.write(self.fd_out, view) :]
                continue
            except BlockingIOError:
                pass
            except OSError:
                return  # the host is gone: the run is over, nothing left to say
            ready = select.poll()
            ready.register(self.fd_out, select.POLLOUT)
            ready.register(self.fd_in, select.POLLIN)
            for fd, _ in ready.poll():
                if fd == self.fd_in:
                    self._read_available(blocking=False)

    def _send_call(self, name: str, args: Any, waiter: _ThreadWaiter | _LoopWaiter) -> int:
        try:
            problem = json_problem(args)
        except BaseException as exc:  # the program's own objects raised while being checked
            problem = f"checking them raised {type(exc).__name__}"
        if problem is not None:
            self.fail(
                "invalid_completion",
                f"the arguments of binding {name} are not lossless JSON: {problem}",
            )
        try:
            raw = msgspec.json.encode(args)
        except (TypeError, ValueError, OverflowError, RecursionError) as exc:
            self.fail(
                "invalid_completion", f"the arguments of binding {name} cannot be sent: {exc}"
            )
        with self._write_lock:  # ids go out in increasing order: the host checks that
            self._next_id += 1
            call_id = self._next_id
            replayed = self.replayer is not None and self.replayer.records(call_id)
            if not replayed:
                self._waiters[call_id] = waiter
                self._write(encode_frame(Call(id=call_id, name=name, args=msgspec.Raw(raw))))
        if replayed:  # the journal answers it, here
            self.replayer.ask(call_id, name, raw, waiter)
        return call_id

    def deliver_replayed(self, waiter: Any, value: Any, error: BaseException | None) -> None:
        """Give a recorded answer, through the waiter's loop (never at once, as a reply)."""
        if isinstance(waiter, _LoopWaiter):
            loop = waiter.loop
            if loop.is_closed():
                return
            if _running_loop() is loop:  # the asking loop: no wake-up through its self-pipe
                loop.call_soon(_settle_future, waiter.future, value, error)
            else:
                loop.call_soon_threadsafe(_settle_future, waiter.future, value, error)
            return
        waiter.value, waiter.error, waiter.done = value, error, True
        if waiter.thread != threading.get_ident():
            wake = _WAKE_FDS.get(waiter.thread)
            if wake is not None:
                os.eventfd_write(wake, 1)

    # ---- receiving --------------------------------------------------------------------------

    def _read_available(self, *, blocking: bool = True) -> None:
        """Read what the host sent and deliver it (one reader at a time)."""
        if not self._read_lock.acquire(blocking):
            return
        try:
            try:
                data = os.read(self.fd_in, _READ_SIZE)
            except BlockingIOError:
                return
            except OSError:
                data = b""
            if not data:
                self._host_gone()
                return
            bodies, self._read_ahead = self._read_ahead + self._frames.feed(data), []
        finally:
            self._read_lock.release()
        for body in bodies:
            try:
                message = _host_decoder.decode(body)
            except msgspec.DecodeError:
                continue
            if isinstance(message, Reply):
                self._deliver(message.id, message.value, None)
            elif isinstance(message, ReplyError):
                error = tool_call_error(
                    message.tool, message.message, message.code, message.exception_type
                )
                self._deliver(message.id, None, error)

    def _deliver(self, call_id: int, value: Any, error: BaseException | None) -> None:
        waiter = self._waiters.pop(call_id, None)
        if waiter is None:
            return
        if isinstance(waiter, _LoopWaiter):
            if waiter.loop.is_closed():
                return
            if _running_loop() is waiter.loop:
                _settle_future(waiter.future, value, error)
            else:
                waiter.loop.call_soon_threadsafe(_settle_future, waiter.future, value, error)
            return
        waiter.value, waiter.error, waiter.done = value, error, True
        if waiter.thread != threading.get_ident():
            wake = _WAKE_FDS.get(waiter.thread)
            if wake is not None:
                os.eventfd_write(wake, 1)

    def _host_gone(self) -> NoReturn:
        """The host went away: nothing can answer us any more."""
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except BaseException:
                pass
        os._exit(0)

    def _on_readable(self) -> None:
        self._read_available(blocking=False)

    # ---- the two call styles -----------------------------------------------------------------

    def call_sync(self, name: str, args: Any) -> Any:
        """A plain call: block this thread until the reply."""
        waiter = _ThreadWaiter()
        wake = self._wake_fd()
        self._send_call(name, args, waiter)
        poller = select.poll()
        poller.register(self.fd_in, select.POLLIN)
        poller.register(wake, select.POLLIN)
        while not waiter.done:
            for fd, _ in poller.poll():
                if fd == wake:
                    os.eventfd_read(wake)
                else:
                    self._read_available()
        if waiter.error is not None:
            raise waiter.error
        return waiter.value

    async def call_async(self, name: str, args: Any) -> Any:
        """An awaited call, on whatever loop awaits it."""
        loop = asyncio.get_running_loop()
        waiter = _LoopWaiter(loop)
        if loop not in self._loops:
            loop.add_reader(self.fd_in, self._on_readable)
            self._loops.add(loop)
        self._send_call(name, args, waiter)
        return await waiter.future

    def _wake_fd(self) -> int:
        wake: _WakeFd | None = getattr(self._wake, "fd", None)
        if wake is None:
            wake = self._wake.fd = _WakeFd()
        return wake.fd


#: Each plain-calling thread's eventfd, by thread id (the reader wakes the thread it served).
_WAKE_FDS: dict[int, int] = {}


class _WakeFd:
    """A thread's eventfd, held in its thread-local storage: closed when the thread ends."""

    def __init__(self) -> None:
        self.fd = os.eventfd(0, os.EFD_CLOEXEC | os.EFD_NONBLOCK)
        self.thread = threading.get_ident()
        _WAKE_FDS[self.thread] = self.fd

    def __del__(self) -> None:
        if _WAKE_FDS.get(self.thread) == self.fd:
            del _WAKE_FDS[self.thread]
        os.close(self.fd)


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


class PendingCall(Coroutine[Any, Any, Any]):
    """What ``tools.x(...)`` gives in the async style: await it. Used as a value, it says so."""

    __slots__ = ("_args", "_bridge", "_coroutine", "_name")

    def __init__(self, bridge: Bridge, name: str, args: Any) -> None:
        self._bridge = bridge
        self._name = name
        self._args = args
        self._coroutine: Coroutine[Any, Any, Any] | None = None

    def _inner(self) -> Coroutine[Any, Any, Any]:
        if self._coroutine is None:
            self._coroutine = self._bridge.call_async(self._name, self._args)
        return self._coroutine

    def __await__(self) -> Generator[Any, None, Any]:
        return self._inner().__await__()

    def send(self, value: Any) -> Any:
        return self._inner().send(value)

    def throw(self, *args: Any) -> Any:
        return self._inner().throw(*args)

    def close(self) -> None:
        if self._coroutine is not None:
            self._coroutine.close()

    def _misused(self, what: str) -> TypeError:
        return TypeError(
            f"{what} the result of {self._name}(...), which was not awaited: write "
            f"`await {self._name}(...)` (did you forget await?)"
        )

    def __repr__(self) -> str:
        return f"<un-awaited call {self._name}(...)>"

    def __getattr__(self, name: str) -> Any:
        raise self._misused(f"cannot read attribute {name!r} of")

    def __getitem__(self, key: Any) -> Any:
        raise self._misused("cannot index")

    def __iter__(self) -> Any:
        raise self._misused("cannot iterate over")

    def __len__(self) -> int:
        raise self._misused("cannot take the length of")

    def __bool__(self) -> bool:
        raise self._misused("cannot test the truth of")

    def __str__(self) -> str:
        raise self._misused("cannot turn into text")

    def __format__(self, spec: str) -> str:
        raise self._misused("cannot format")

    def __contains__(self, item: Any) -> bool:
        raise self._misused("cannot search")

    def __eq__(self, other: object) -> bool:
        raise self._misused("cannot compare")

    __hash__ = object.__hash__

    def __add__(self, other: Any) -> Any:
        raise self._misused("cannot add to")

    __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = __truediv__ = __add__

    def __int__(self) -> int:
        raise self._misused("cannot convert")

    __float__ = __index__ = __int__


def _arguments(name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    if not args:
        return kwargs
    if len(args) == 1 and not kwargs and type(args[0]) is dict:
        return args[0]
    raise TypeError(f"{name}() takes keyword arguments (or one dict of them)")


def make_binding(bridge: Bridge, name: str, style: CallStyle) -> Any:
    """The callable the program sees as binding ``name``, in ``style``."""
    if style == "sync":

        def binding(*args: Any, **kwargs: Any) -> Any:
            return bridge.call_sync(name, _arguments(name, args, kwargs))

    else:

        def binding(*args: Any, **kwargs: Any) -> Any:
            return PendingCall(bridge, name, _arguments(name, args, kwargs))

    binding.__name__ = name.rsplit(".", 1)[-1]
    binding.__qualname__ = name
    return binding
