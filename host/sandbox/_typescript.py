"""``TypeScriptRuntime``: TypeScript programs, each in a fresh contained child that runs Deno.

The same runtime as ``SubprocessRuntime`` (template, containment, spares, budgets watchdog,
cgroups, working directory, bridge, log intake, output cap): a child is forked and contained
exactly as a Python one, then becomes Deno (``runtime._exec``) on the same pipes, speaking
the same frames. What differs is here: the host's front end type-strips the program (a syntax
error is kind ``parse`` and starts no child), spares are Deno processes already started and
waiting for their program (Deno cannot be forked warm), and the limits the child can no longer
set itself once it is Deno (heap, CPU) are set on it by the host before its program goes out.
"""

from __future__ import annotations

import logging
import math
import os
import resource
import select
import signal
from collections.abc import Mapping
from typing import Any

import anyio

from host.sandbox._deno import child_argv
from host.sandbox._frontend import TypeScriptFrontEnd
from host.sandbox._options import SessionState
from host.sandbox._recent import Recent
from host.sandbox._run import Run
from host.sandbox._runtime import SubprocessRuntime
from host.sandbox._session import MAX_STATE_BYTES, Session
from host.sandbox._slot import ChildSlot, Engine
from host.sandbox._template import TemplateProcess
from runtime import (
    Decision,
    Journal,
    Limits,
    RunError,
    RunRequest,
    RunResult,
    RuntimeClosedError,
    RuntimeUsageError,
)
from runtime.lowlevel import (
    CallLedger,
    Policy,
    ProgramRejected,
    Start,
    check_request,
    process_cpu_ns,
)

__all__ = ("TypeScriptRuntime",)

_log = logging.getLogger("host.sandbox")
#: Compiled programs kept per runtime.
_COMPILED_KEPT = 64
#: The front end's uid on a root host ("nobody": it parses, and no run has that uid).
_FRONTEND_UID = 65534
#: Spares the pool may grow to when runs come faster than Deno starts (each ~50 MB of memory).
_SPARES_MAX = 6
#: Runs in a row that found their spare ready before the pool gives one spare back.
_HITS_TO_SHRINK = 32
#: What V8 writes on stderr (the log pipe) when it ends the process past its heap cap.
_V8_OUT_OF_MEMORY = ("Fatal JavaScript out of memory", "Fatal process out of memory")
#: The first line of what V8 writes before it ends a process out of memory.
_V8_REPORT = "<--- Last few GCs --->"
#: How V8 ends a process it cannot go on with (a trap, an abort, an illegal instruction).
_V8_FATAL = (-int(signal.SIGTRAP), -int(signal.SIGABRT), -int(signal.SIGILL), -int(signal.SIGSEGV))


def _engine_pid(root: int) -> int:
    """The process that runs Deno: the last of the chain of single children below ``root``
    (the child itself, or the program's process under the namespaces' init)."""
    pid = root
    for _ in range(4):
        try:
            with open(f"/proc/{pid}/task/{pid}/children", "rb") as f:
                below = f.read().split()
        except OSError:
            return pid
        if len(below) != 1:
            return pid
        pid = int(below[0])
    return pid


def _data_bytes(pid: int) -> int:
    with open(f"/proc/{pid}/statm", "rb") as f:
        return int(f.read().split()[5]) * os.sysconf("SC_PAGE_SIZE")


#: Room above Deno's own data at its start for what a run adds besides the program's heap
#: (the program's module, V8's young generation, compiled code).
_ENGINE_ROOM = 64 * 1024 * 1024


class TypeScriptRun(Run):
    """A run whose child became Deno: its limits are set from outside, its V8 death read."""

    def _before_start(self, start: Start) -> None:
        """The heap cap above what Deno uses now (``RLIMIT_DATA``) and the CPU backstop (a
        little past the budget, ``RLIMIT_CPU``), as a Python child sets its own. Setting
        another process's limits takes CAP_SYS_RESOURCE or the same uid: where neither holds
        (a root host without that capability) the cap it started under stays (see
        ``TypeScriptRuntime._engine``)."""
        if self.pid is None:
            return
        pid = _engine_pid(self.pid)
        try:
            heap = _data_bytes(pid) + start.heap_bytes
            resource.prlimit(pid, resource.RLIMIT_DATA, (heap, heap))
            used = process_cpu_ns(pid) + start.compute_ns
            seconds = math.ceil(used / 1e9) + 2
            resource.prlimit(pid, resource.RLIMIT_CPU, (seconds, seconds))
        except (OSError, ValueError, IndexError) as exc:  # gone: the run settles as died
            _log.debug("dsh-code: cannot set a TypeScript child's limits: %r", exc)

    def _classify_death(self, error: RunError) -> RunError:
        status = self.exit_status
        lines = self.logs.lines
        if status in _V8_FATAL and any(
            marker in line for line in lines[-40:] for marker in _V8_OUT_OF_MEMORY
        ):
            # V8's report (its last GCs, its C stack) is not the program's output
            start = next(
                (i for i in range(max(len(lines) - 40, 0), len(lines)) if _V8_REPORT in lines[i]),
                len(lines),
            )
            del lines[start - (start > 0 and not lines[start - 1]) :]
            return RunError(
                kind="memory",
                message=f"the program passed the heap cap (max_heap_mb {self.limits.max_heap_mb}):"
                " V8 ran out of memory",
            )
        return super()._classify_death(error)


class TypeScriptRuntime(SubprocessRuntime):
    """Runs each TypeScript program in a fresh contained child running Deno (Linux only).

    The program is the body of an async function (top-level ``await`` and ``return``);
    bindings are ``await tools.x({...})``. Options are ``SubprocessRuntime``'s, but
    ``preload`` and ``python`` (Deno has no modules to preload). ``prefork`` Deno children
    are kept started ahead of time, each waiting for one program; when a run finds none
    ready (Deno's start is longer than the time between runs) the pool grows by one, up to
    6, and gives one back after 32 runs in a row found theirs ready.
    """

    language = "typescript"

    def __init__(
        self,
        *,
        max_concurrent_runs: int = 8,
        max_frame_bytes: int = 64 * 1024 * 1024 + 4096,
        max_file_bytes: int = 256 * 1024 * 1024,
        max_open_files: int = 256,
        max_log_lines: int = 1_000_000,
        max_call_bytes: int = 64 * 1024 * 1024,
        max_json_values: int = 1_000_000,
        prefork: int = 2,
        workdir_root: str | None = None,
        isolation: str = "auto",
        use_cgroups: bool = True,
        max_processes: int = 1024,
        run_as_uid: int | range | None = None,
        network: bool = False,
    ) -> None:
        super().__init__(
            max_concurrent_runs=max_concurrent_runs,
            max_frame_bytes=max_frame_bytes,
            max_file_bytes=max_file_bytes,
            max_open_files=max_open_files,
            max_log_lines=max_log_lines,
            max_call_bytes=max_call_bytes,
            max_json_values=max_json_values,
            prefork=prefork,
            workdir_root=workdir_root,
            isolation=isolation,
            use_cgroups=use_cgroups,
            max_processes=max_processes,
            run_as_uid=run_as_uid,
            network=network,
        )
        #: What a Deno process's data segment is at its start (0: not seen yet): the base of
        #: a child's data rlimit
        self._engine_base = 0
        self._spare_engine = self._engine_for(Limits().max_heap_mb)
        # It only parses, never runs a program: an unprivileged uid no run has is enough.
        self._frontend = TypeScriptFrontEnd(run_uid=_FRONTEND_UID if os.geteuid() == 0 else None)
        self._js: Recent[str, bytes] = Recent(_COMPILED_KEPT)
        self._spares_floor = prefork
        self._hits = 0

    def session(
        self,
        *,
        state: bytes | None = None,
        max_state_bytes: int = MAX_STATE_BYTES,
        commit_on_failure: bool = False,
    ) -> Session:
        """Sessions are for Python programs only: raises ``RuntimeUsageError``."""
        raise RuntimeUsageError(
            "sessions are not available for TypeScript programs (a TypeScript run keeps no "
            "state for the next): use a SubprocessRuntime for sessions"
        )

    async def run(
        self,
        request: RunRequest,
        *,
        resume: Journal | None = None,
        decisions: Mapping[str, Decision] | None = None,
    ) -> RunResult:
        """Run one TypeScript program in a fresh child; resolves with the result whatever the
        program did (see ``SubprocessRuntime.run``). Its journal is kept, but a TypeScript run
        cannot be resumed yet (``resume`` raises ``RuntimeUsageError``)."""
        if resume is not None or decisions:
            raise RuntimeUsageError(
                "a TypeScript run cannot be resumed from its journal yet (its child does not "
                "replay): resume Python programs with a SubprocessRuntime"
            )
        if request.policy != "python":
            raise RuntimeUsageError(
                f"policy {request.policy!r} is for Python programs; a TypeScript program runs "
                "under Deno with no permissions (leave policy at its default)"
            )
        if request.call_style != "async":
            raise RuntimeUsageError(
                "a TypeScript program calls bindings with await (call_style='async'): a "
                "blocking call cannot be written in JavaScript"
            )
        return await super().run(request)

    async def _run_in_session(
        self,
        request: RunRequest,
        state: bytes | None,
        max_state_bytes: int,
        commit_on_failure: bool = False,
        resume: Journal | None = None,
        decisions: Mapping[str, Decision] | None = None,
    ) -> tuple[RunResult, Any]:
        if self._closed:
            raise RuntimeClosedError("this TypeScriptRuntime is closed; create a new one")
        if state is not None:
            self.session()  # raises
        try:  # the front end answers in a moment, but its first start takes a while
            await self._compile(request.program, request.policy)  # kept: the next is a lookup
        except ProgramRejected:
            pass  # reported below, as for Python
        except RuntimeClosedError:
            if not self._closed:
                raise
            error = RunError(kind="aborted", message="the runtime was closed while the run started")
            return self._failed_before_start(error), None
        except anyio.get_cancelled_exc_class():
            error = RunError(
                kind="aborted", message="the caller cancelled the run before it started"
            )
            return self._failed_before_start(error), None
        return await super()._run_in_session(request, state, max_state_bytes)  # never resumed

    def _check_request(self, request: RunRequest) -> None:
        # a binding's last part may be any name: `tools["my-tool"]` is as good as `tools.x`
        check_request(request, any_member=True)

    async def _compile(self, program: str, policy: Policy) -> bytes:
        """The module the child imports (raises ``ProgramRejected``); the last few are kept."""
        code = self._js.get(program)
        if code is not None:
            return code
        code = await self._frontend.compile(program)
        if not self._engine_base:  # the front end is a Deno process too: its size is Deno's
            self._engine_base = self._frontend.data_bytes()
            self._spare_engine = self._engine_for(Limits().max_heap_mb)
        self._js.put(program, code)
        return code

    def _engine_for(self, heap_mb: int) -> Engine:
        """Deno under a V8 heap cap of ``heap_mb``, and a data rlimit of the same heap above
        what Deno's own start takes (once a first child has shown it)."""
        base = self._engine_base
        data = base + heap_mb * 1024 * 1024 + _ENGINE_ROOM if base else 0
        return Engine(tuple(child_argv(heap_mb)), data)

    def _engine(self, request: RunRequest) -> Engine:
        return self._engine_for(request.limits.max_heap_mb)

    async def _take_slot(self, template: TemplateProcess, engine: Engine | None) -> ChildSlot:
        """A spare (or a fresh child), and the pool sized from whether it was ready: a Deno
        child is started, not forked warm, so how many must wait ahead of the runs depends on
        how long Deno takes to start here against how often runs come."""
        slot = await super()._take_slot(template, engine)
        ready = bool(select.select([slot.fds["from_child"]], [], [], 0)[0])
        if not ready and self._prefork < max(self._spares_floor, _SPARES_MAX):
            self._prefork += 1
            self._hits = 0
            if not self._replenishing:
                self._replenishing = True
                self._background.spawn(self._replenish, what="forking a spare child")
        elif ready:
            self._hits += 1
            if self._hits >= _HITS_TO_SHRINK and self._prefork > self._spares_floor:
                self._prefork -= 1
                self._hits = 0
        return slot

    def _make_run(
        self,
        request: RunRequest,
        code: bytes,
        slot: ChildSlot,
        session: SessionState | None,
        ledger: CallLedger,
    ) -> Run:
        return TypeScriptRun(request, code, slot, self._options, self._watchdog, session, ledger)

    async def start(self) -> None:
        """Start the front end, the template and the spares now (else the first run does)."""
        await self._compile("return 1;", "python")  # Deno's size: the spares' data rlimit
        await super().start()

    async def __aenter__(self) -> TypeScriptRuntime:
        await self.start()
        return self

    async def aclose(self) -> None:
        """Abort in-flight runs, wait until every child (and the front end) has exited."""
        try:
            await super().aclose()
        finally:
            await self._frontend.aclose()

    def __repr__(self) -> str:
        state = "closed" if self._closed else f"{len(self._runs)} running"
        return f"<TypeScriptRuntime isolation={self.isolation!r} {state}>"
