"""The wire between host and child: tagged msgspec Structs in 4-byte length-prefixed JSON frames."""

from __future__ import annotations

import struct
import typing
from typing import Any, Literal

import msgspec

__all__ = (
    "CHILD_FAILURES",
    "HEADER",
    "Call",
    "CallStyle",
    "ChildFailureKind",
    "ChildMessage",
    "Compiled",
    "Done",
    "Failed",
    "FrameBuffer",
    "HostMessage",
    "Prepare",
    "Ready",
    "Reply",
    "ReplyError",
    "Start",
    "State",
    "TemplateConfig",
    "encode_frame",
)

HEADER = struct.Struct("!I")

CallStyle = Literal["async", "sync"]
#: The failure kinds a child may report (the others are the host's to decide); ``parse`` only
#: for a program the host left to the child to compile.
ChildFailureKind = Literal[
    "parse", "exception", "invalid_completion", "output_limit", "memory", "state", "replay_diverged"
]
CHILD_FAILURES: tuple[str, ...] = typing.get_args(ChildFailureKind)


class TemplateConfig(msgspec.Struct, frozen=True, kw_only=True):
    """Host -> template, at its start: what to settle for every child it will fork."""

    isolation: Literal["auto", "namespaces", "process"] = "auto"
    #: On a root host, the uids the host will ask children to run as (each run its own);
    #: empty: the host's own uid, without capabilities.
    run_uids: list[int] = msgspec.field(default_factory=list)
    preload: list[str] = msgspec.field(default_factory=list)
    #: Let programs open sockets (at the process level: the host's network).
    network: bool = False
    #: Where runs' directories are made: writable in the read-only view of a root host.
    workdir_root: str = ""


class Prepare(msgspec.Struct, tag=True, frozen=True):
    """Host -> child, first, before any program: what does not depend on the program, so a
    child forked ahead of time is contained before its ``Start`` arrives."""

    workdir: str  # the run's private directory (made by the host)
    file_bytes: int
    open_files: int
    linger: bool  # after the report, wait to be killed (False: the run's cgroup holds it)
    warm_up: bool  # run a throwaway program first (a spare: it has the time while it waits)
    max_processes: int = 0  # RLIMIT_NPROC, where the run's uid is its own (0: not set)
    #: Another engine to become once contained (TypeScript: Deno), on fds 0 and 1 (``[]``: none)
    exec_argv: list[str] = []
    exec_env: dict[str, str] = {}
    exec_data_bytes: int = 0  # the engine's RLIMIT_DATA (0: none)


class Start(msgspec.Struct, tag=True, frozen=True):
    """Host -> child: the program and what the child needs to run it."""

    code: bytes  # marshal of the compiled program (host and child run the same interpreter)
    source: str  # for tracebacks (linecache)
    policy: Literal["python", "restricted"]
    call_style: CallStyle
    inputs: dict[str, Any]
    bindings: list[str]
    max_output_bytes: int
    heap_bytes: int
    compute_ns: int  # the compute budget: the child's own CPU timer stops it there
    state: bytes = b""  # a session's state to restore before the program (only the child loads it)
    keep_state: bool = False  # a session run: send the program's globals (State) before Done
    max_state_bytes: int = 0
    state_on_failure: bool = False  # also before an exception's or a bad result's Failed
    random_seed: int = 0  # the seed of `random` (0: leave it as the fork left it)
    #: A resumed run: the journal's settled calls (raw JSON list, in the order they settled),
    #: which the child answers itself as the program asks them again.
    replay: msgspec.Raw = msgspec.Raw(b"[]")


class Reply(msgspec.Struct, tag=True, frozen=True):
    """Host -> child: a binding call succeeded with ``value``."""

    id: int
    value: Any


class ReplyError(msgspec.Struct, tag=True, frozen=True):
    """Host -> child: a binding call failed; the program sees ``ToolCallError``."""

    id: int
    tool: str
    message: str
    code: str
    exception_type: str | None = None
    """The builtin exception the call failed with (``KeyError``): the error is one too."""


class Call(msgspec.Struct, tag=True, frozen=True):
    """Child -> host: call binding ``name`` with ``args`` (raw JSON, decoded by the host)."""

    id: int
    name: str
    args: msgspec.Raw


class Ready(msgspec.Struct, tag=True, frozen=True):
    """Child -> host, first: set up, waiting for ``Start``; its CPU from here is the program's."""


class Compiled(msgspec.Struct, tag=True, frozen=True):
    """Child -> host: the child compiled the program itself; from here on it runs."""


class State(msgspec.Struct, tag=True, frozen=True):
    """Child -> host, just before ``Done`` of a session run: the program's globals as an
    opaque blob (the host stores it, never loads it), and the names left out, with why."""

    blob: bytes
    names: list[str]
    dropped: dict[str, str]


class Done(msgspec.Struct, tag=True, frozen=True):
    """Child -> host: the program completed; ``value`` is its raw JSON result when ``has_value``."""

    has_value: bool
    value: msgspec.Raw
    is_repr: bool = False  # value is the repr() string of a bare last expression's non-JSON value


class Failed(msgspec.Struct, tag=True, frozen=True, omit_defaults=True):
    """Child -> host: the program failed (exception, invalid_completion, output_limit, memory)."""

    kind: ChildFailureKind
    message: str
    exception_type: str | None = None
    traceback: str | None = None
    lineno: int | None = None


HostMessage = Prepare | Start | Reply | ReplyError
ChildMessage = Ready | Call | Compiled | State | Done | Failed

_encoder = msgspec.json.Encoder()


def encode_frame(message: msgspec.Struct) -> bytes:
    """One frame: the 4-byte big-endian length, then the JSON body."""
    body = _encoder.encode(message)
    return HEADER.pack(len(body)) + body


class FrameBuffer:
    """Reassembles frames from a byte stream; frames over ``max_frame`` are skipped, not buffered."""

    def __init__(self, max_frame: int) -> None:
        self._buf = bytearray()
        self._skip = 0
        self.max_frame = max_frame
        self.oversized = 0

    def feed(self, data: bytes) -> list[bytes]:
        """Add bytes; return the complete frame bodies now available, in order."""
        if self._skip:
            taken = min(self._skip, len(data))
            self._skip -= taken
            data = data[taken:]
        self._buf += data
        bodies: list[bytes] = []
        while len(self._buf) >= HEADER.size:
            (size,) = HEADER.unpack_from(self._buf)
            if size > self.max_frame:
                self.oversized += 1
                available = len(self._buf) - HEADER.size
                taken = min(size, available)
                del self._buf[: HEADER.size + taken]
                self._skip = size - taken
                if self._skip:
                    break
                continue
            if len(self._buf) < HEADER.size + size:
                break
            bodies.append(bytes(self._buf[HEADER.size : HEADER.size + size]))
            del self._buf[: HEADER.size + size]
        return bodies

    @property
    def pending(self) -> int:
        """Bytes of an incomplete frame held back (nonzero at EOF means a truncated frame)."""
        return len(self._buf)
