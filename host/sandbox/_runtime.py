"""``SubprocessRuntime``: the code runtime that runs each program in a fresh forked child."""

from __future__ import annotations

import functools
import logging
import marshal
import os
import secrets
import sys
from collections.abc import Mapping, Sequence
from typing import Any

import anyio

from host.sandbox._background import Background
from host.sandbox._options import (
    MAX_HASH_SEED,
    RunOptions,
    SessionState,
    check_options,
    default_workdir_root,
)
from host.sandbox._recent import Recent
from host.sandbox._rooms import ROOMS_AHEAD, Room, Rooms
from host.sandbox._run import Run
from host.sandbox._session import MAX_STATE_BYTES, Session
from host.sandbox._slot import ChildSlot, Engine
from host.sandbox._template import TemplateProcess
from host.sandbox._uids import DEFAULT_UIDS, UidPool
from host.sandbox._watchdog import Watchdog
from host.telemetry import trace_run
from runtime import (
    Decision,
    Journal,
    RunError,
    RunRequest,
    RunResult,
    RunStats,
    RuntimeClosedError,
    RuntimeUsageError,
)
from runtime.lowlevel import (
    CallLedger,
    Policy,
    ProgramRejected,
    TemplateConfig,
    check_request,
    compile_program,
)

__all__ = ("SubprocessRuntime",)


_log = logging.getLogger("host.sandbox")
#: Programs longer than this (characters) are compiled in their child, not on our event loop.
_COMPILE_INLINE = 20_000
#: Compiled programs kept per runtime.
_COMPILED_KEPT = 64


class SubprocessRuntime:
    """Runs each program in a fresh child forked from a template process (Linux only).

    Use ``async with SubprocessRuntime() as rt:`` or call ``aclose()`` when done. A run
    counts against ``max_concurrent_runs`` until its processes are gone; ``prefork``
    children wait ahead of time, one run each; ``use_cgroups`` gives runs cgroups of their
    own; on a root host each run has a uid of its own from ``run_as_uid`` (a range), or all
    the one uid given (0: root without capabilities); no socket but socketpairs unless
    ``network``; ``preload`` modules are imported once by the template; ``hash_seed`` is
    every child's ``PYTHONHASHSEED`` (journals record it: a resume replays under it).
    """

    language = "python"

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
        preload: Sequence[str] = (),
        python: str = sys.executable,
        hash_seed: int | None = None,
    ) -> None:
        if not sys.platform.startswith("linux"):
            raise RuntimeUsageError(
                f"SubprocessRuntime supports Linux only (this is {sys.platform}): it relies on "
                "fork, /proc, prctl and rlimits"
            )
        check_options(
            counts={
                "max_concurrent_runs": max_concurrent_runs,
                "max_frame_bytes": max_frame_bytes,
                "max_file_bytes": max_file_bytes,
                "max_open_files": max_open_files,
                "max_log_lines": max_log_lines,
                "max_call_bytes": max_call_bytes,
                "max_json_values": max_json_values,
                "prefork": prefork,
                "max_processes": max_processes,
            },
            isolation=isolation,
            run_as_uid=run_as_uid,
            preload=preload,
            hash_seed=hash_seed,
        )
        self._hash_seed = hash_seed or secrets.randbelow(MAX_HASH_SEED) + 1
        self._preload = tuple(preload)
        self._requested_isolation = isolation
        self._use_cgroups = use_cgroups
        self._max_processes = max_processes
        self._why_not_cgroups = "" if use_cgroups else "use_cgroups=False"
        self._prefork = prefork
        self._spares: list[ChildSlot] = []
        #: What spares become once contained (None: they stay Python; see ``_engine``).
        self._spare_engine: Engine | None = None
        self._compiled: Recent[tuple[str, str], bytes] = Recent(_COMPILED_KEPT)
        self._options = RunOptions(
            workdir_root=workdir_root or default_workdir_root(),
            max_frame_bytes=max_frame_bytes,
            max_file_bytes=max_file_bytes,
            max_open_files=max_open_files,
            max_log_lines=max_log_lines,
            max_call_bytes=max_call_bytes,
            max_json_values=max_json_values,
        )
        self._network = network
        root = os.geteuid() == 0
        # On a root host: a uid per run from a pool (the default), or one uid for all.
        self._uids = (
            UidPool(run_as_uid or DEFAULT_UIDS, max_concurrent_runs + prefork + ROOMS_AHEAD + 2)
            if root and not isinstance(run_as_uid, int)
            else None
        )
        fixed_uid = run_as_uid if root and isinstance(run_as_uid, int) and run_as_uid else None
        self._rooms = Rooms(self._options, self._uids, fixed_uid)
        self._max_concurrent = max_concurrent_runs
        self._python = python
        self._template: TemplateProcess | None = None
        self._seeded: dict[int, TemplateProcess] = {}  # by hash seed, for resumes
        self._template_lock: anyio.Lock | None = None
        self._limiter: anyio.CapacityLimiter | None = None
        self._runs: set[Run] = set()
        self._background = Background()
        self._watchdog = Watchdog()
        self._entered = 0  # calls inside run() right now (starting, running or finishing)
        self._idle: anyio.Event | None = None
        self._swept = False
        self._replenishing = False
        self._closed = False

    @property
    def hash_seed(self) -> int:
        """Every child's hash seed (``PYTHONHASHSEED``): str hashes and set order."""
        return self._hash_seed

    @property
    def workdir_root(self) -> str:
        """Where runs' private working directories are made (and removed)."""
        return self._options.workdir_root

    @property
    def isolation(self) -> str:
        """The isolation level runs get: "namespaces" or "process" ("auto" until started)."""
        if self._template is not None:
            return self._template.isolation
        return self._requested_isolation

    @property
    def why_not_namespaces(self) -> str:
        """Why the namespaces level is not in use (empty when it is, or was not asked for)."""
        return self._template.why_not_namespaces if self._template is not None else ""

    @property
    def cgroups(self) -> tuple[str, ...]:
        """What runs' cgroups give: some of "kill", "cpu", "pids", "memory" (or none)."""
        cgroups = self._rooms.cgroups
        return cgroups.features if cgroups is not None else ()

    @property
    def why_not_cgroups(self) -> str:
        """Why runs have no cgroups (empty when they have, or until started)."""
        return self._why_not_cgroups

    @property
    def containment(self) -> dict[str, Any]:
        """What else runs get, as the template settled it (README "Security"; {} until then)."""
        if self._template is None:
            return {}
        return {
            k: v
            for k, v in self._template.facts.items()
            if k not in ("isolation", "why_not_namespaces")
        }

    async def start(self) -> None:
        """Start the template now (else the first run does); settles ``isolation``."""
        if self._closed:
            raise RuntimeClosedError("this SubprocessRuntime is closed; create a new one")
        self._entered += 1
        try:
            await self._ensure_template()
            await self._replenish()
        finally:
            self._leave()

    async def __aenter__(self) -> SubprocessRuntime:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    def _leave(self) -> None:
        self._entered -= 1
        if self._entered == 0 and self._idle is not None:
            self._idle.set()

    def session(
        self,
        *,
        state: bytes | None = None,
        max_state_bytes: int = MAX_STATE_BYTES,
        commit_on_failure: bool = False,
    ) -> Session:
        """Runs that carry the program's globals, from ``state`` (``Session.state``) on; with
        ``commit_on_failure``, also a failed run's, up to its exception (as Python's REPL)."""
        return Session(self, state, max_state_bytes, commit_on_failure)

    async def run(
        self,
        request: RunRequest,
        *,
        resume: Journal | None = None,
        decisions: Mapping[str, Decision] | None = None,
    ) -> RunResult:
        """Run one program in a fresh child (replaying ``resume``'s journal first); returns
        once no process of the run can execute again, whatever the program did."""
        result, _ = await self._run_in_session(request, None, 0, resume=resume, decisions=decisions)
        return result

    async def _run_in_session(
        self,
        request: RunRequest,
        state: bytes | None,
        max_state_bytes: int,
        commit_on_failure: bool = False,
        resume: Journal | None = None,
        decisions: Mapping[str, Decision] | None = None,
    ) -> tuple[RunResult, Any]:
        """A run, in a session when ``state`` is not None: its result, and the State frame
        its child sent (None outside a session, or when the run failed)."""
        if self._closed:
            raise RuntimeClosedError("this SubprocessRuntime is closed; create a new one")
        self._check_request(request)
        with trace_run(self, request, session=state is not None) as traced:
            hash_seed = self._hash_seed if resume is None else resume.seeds.hash
            ledger = CallLedger(
                traced.request, hash_seed=hash_seed, resume=resume, decisions=decisions, state=state
            )
            result, sent = await self._run_ledgered(
                traced.request, state, max_state_bytes, ledger, commit_on_failure
            )
            result = ledger.finish(result) if result.journal is None else result
            traced.end(result)
        return result, sent

    async def _run_ledgered(
        self,
        request: RunRequest,
        state: bytes | None,
        max_state_bytes: int,
        ledger: CallLedger,
        commit_on_failure: bool,
    ) -> tuple[RunResult, Any]:
        try:
            code = await self._compile(request.program, request.policy)
        except ProgramRejected as exc:
            return self._failed_before_start(
                RunError(
                    kind="parse",
                    message=exc.message,
                    lineno=exc.lineno,
                    exception_type=exc.exception_type,
                )
            ), None
        if request.abort is not None and request.abort.is_set():
            return self._failed_before_start(
                RunError(kind="aborted", message="the run was aborted before it started")
            ), None
        session = (
            None
            if state is None
            else SessionState(blob=state, max_bytes=max_state_bytes, keep_failed=commit_on_failure)
        )
        self._entered += 1
        try:
            return await self._run(request, code, session, ledger)
        finally:
            self._leave()

    async def _run(
        self, request: RunRequest, code: bytes, session: SessionState | None, ledger: CallLedger
    ) -> tuple[RunResult, Any]:
        if self._limiter is None:
            self._limiter = anyio.CapacityLimiter(self._max_concurrent)
        limiter = self._limiter
        ticket = object()  # the slot is given back by the run's release, in another task
        if limiter.available_tokens >= 1:
            limiter.acquire_on_behalf_of_nowait(ticket)  # no checkpoint: start at once
        else:
            await limiter.acquire_on_behalf_of(ticket)
        run: Run | None = None
        closed = RunError(kind="aborted", message="the runtime was closed while the run started")
        try:
            try:
                template = await self._ensure_template()
            except Exception:
                if self._closed:  # aclose() ended the start this run was waiting for
                    return self._failed_before_start(closed), None
                raise
            if ledger.seeds.hash != template.hash_seed:
                template = await self._seeded_template(ledger.seeds.hash)
            if self._closed:
                return self._failed_before_start(closed), None
            self._rooms.heap_bytes = request.limits.max_heap_mb * 1024 * 1024
            slot = await self._take_slot(template, self._engine(request))
            run = self._make_run(request, code, slot, session, ledger)
            self._runs.add(run)
            result = await run.execute()
            return result, run.state
        finally:
            if run is None:
                limiter.release_on_behalf_of(ticket)
            else:
                self._runs.discard(run)
                self._entered += 1  # until its resources are freed: aclose() waits for it
                self._background.spawn(
                    lambda: self._release(run, limiter, ticket), what="releasing a run's resources"
                )

    def _check_request(self, request: RunRequest) -> None:
        """Raise ``RuntimeUsageError`` for what the caller got wrong."""
        check_request(request)

    def _engine(self, request: RunRequest) -> Engine | None:
        """What a run's child becomes once contained; None: it runs Python itself."""
        return None

    def _make_run(
        self,
        request: RunRequest,
        code: bytes,
        slot: ChildSlot,
        session: SessionState | None,
        ledger: CallLedger,
    ) -> Run:
        return Run(request, code, slot, self._options, self._watchdog, session, ledger)

    async def _release(self, run: Run, limiter: anyio.CapacityLimiter, ticket: object) -> None:
        """After a run: its processes gone, its resources freed, its slot given back."""
        try:
            await run.release()
        finally:
            try:
                with anyio.CancelScope(shield=True):  # file system work: off the event loop
                    await self._rooms.in_worker(self._rooms.free, run.slot)
            finally:
                limiter.release_on_behalf_of(ticket)
                self._leave()

    async def _compile(self, program: str, policy: Policy) -> bytes:
        """The marshalled code of ``program`` (b"": the child compiles it); the last few are
        kept, as agents repeat programs. Raises ``ProgramRejected``."""
        code = self._compiled.get((program, policy))
        if code is not None:
            return code
        if len(program) > _COMPILE_INLINE:
            # Compiling holds the GIL for as long as it takes (a thread would not help): a
            # long program is compiled by its child, which reports a failure as `parse`.
            return b""
        code = marshal.dumps(compile_program(program, policy))
        self._compiled.put((program, policy), code)
        return code

    def _failed_before_start(self, error: RunError) -> RunResult:
        """The result of a run that failed before any child was involved."""
        stats = RunStats(
            isolation=self.isolation, compute_ms=0, wall_ms=0, calls=0, dropped_frames=0
        )
        return RunResult(logs=[], error=error, stats=stats)

    async def _ensure_template(self) -> TemplateProcess:
        template = self._template
        if template is not None and template.alive:
            return template  # the common case: no lock (taking one yields to the event loop)
        if self._template_lock is None:
            self._template_lock = anyio.Lock()
        async with self._template_lock:
            if self._template is None or not self._template.alive:
                if self._template is not None:
                    await self._template.aclose()
                    self._template = None
                if self._closed:
                    raise RuntimeClosedError("this SubprocessRuntime is closed; create a new one")
                if not self._swept:
                    await self._rooms.open()
                    self._swept = True
                template = TemplateProcess(
                    self._python, self._template_config(), hash_seed=self._hash_seed
                )
                self._template = template  # before it is ready: aclose() must find it
                await template.start()
                if self._use_cgroups and self._rooms.cgroups is None:
                    self._why_not_cgroups = await self._rooms.open_cgroups(self._max_processes)
                if self._requested_isolation == "auto" and template.isolation != "namespaces":
                    _log.warning(
                        "dsh-code: namespaces are not available (%s); runs use the process level",
                        template.why_not_namespaces,
                    )
            return self._template

    def _template_config(self, isolation: str | None = None) -> TemplateConfig:
        """What every template of this runtime settles (``isolation``: the level asked for)."""
        return TemplateConfig(
            isolation=isolation or self._requested_isolation,  # type: ignore[arg-type]
            run_uids=self._rooms.run_uids(),
            preload=list(self._preload),
            network=self._network,
            workdir_root=self._options.workdir_root,
        )

    async def _seeded_template(self, seed: int) -> TemplateProcess:
        """A template whose children have hash seed ``seed``: for the resume of a journal
        another runtime recorded (a process since restarted); started on first use, kept
        for the next such resume until ``aclose()``."""
        template = self._seeded.get(seed)
        if template is not None and template.alive:
            return template
        assert self._template_lock is not None  # _ensure_template made it
        async with self._template_lock:
            template = self._seeded.pop(seed, None)
            if template is not None and not template.alive:
                await template.aclose()
                template = None
            if template is None:
                if self._closed:
                    raise RuntimeClosedError("this SubprocessRuntime is closed; create a new one")
                config = self._template_config(self.isolation)
                template = TemplateProcess(self._python, config, hash_seed=seed)
                self._seeded[seed] = template  # before it is ready: aclose() must find it
                await template.start()
            self._seeded[seed] = template
            return template

    async def _take_slot(self, template: TemplateProcess, engine: Engine | None) -> ChildSlot:
        """A spare child if one is ready, else a fresh fork; either way the next spare is
        asked for now, so it sets up while this run runs. A spare becomes ``engine``, and
        the next spares become what this run asked for."""
        if template is not self._template:  # a seeded one: no spares
            return await self._fork(template, spare=False, engine=engine)
        slot = None
        self._spare_engine = engine
        while self._spares and slot is None:
            spare = self._spares.pop(0)
            if spare.template is template and spare.engine == engine and not spare.stale():
                slot = spare
            else:
                spare.discard()
                self._entered += 1  # until its files are gone: aclose() waits for them
                self._background.spawn(
                    functools.partial(self._free_room_later, spare),
                    what="removing a stale spare's files",
                )
        if slot is None:
            slot = await self._fork(template, spare=False, engine=engine)
        if len(self._spares) < self._prefork and not self._replenishing:
            # off the caller's path: making a spare's cgroup and directory takes a while
            self._replenishing = True
            self._background.spawn(self._replenish, what="forking a spare child")
        return slot

    async def _fork(
        self, template: TemplateProcess, *, spare: bool, engine: Engine | None = None
    ) -> ChildSlot:
        """A new child slot, in fresh cgroups when we have them. A ``spare`` warms up while
        it waits; a child forked for a run now goes straight to it."""
        cgroup, workdir, uid = await self._room()
        try:
            return await ChildSlot.fork(
                template,
                workdir=workdir,
                file_bytes=self._options.max_file_bytes,
                open_files=self._options.max_open_files,
                warm_up=spare,
                cgroup=cgroup,
                uid=uid,
                own_uid=self._uids is not None,
                max_processes=self._max_processes,
                engine=engine,
            )
        except BaseException:
            with anyio.CancelScope(shield=True):
                await self._rooms.in_worker(self._rooms.give_back, cgroup, uid)
            raise

    async def _room(self) -> Room:
        """A child's room: one made ahead of time (a run then waits for no thread), else one
        made now; the stock is refilled in the background."""
        rooms = self._rooms
        room = rooms.stock.pop() if rooms.stock else None
        if not rooms.filling and not self._closed:
            rooms.filling = True
            self._entered += 1  # aclose() waits for it, and frees what it made
            self._background.spawn(self._fill_rooms, what="making children's directories")
        if room is not None:
            return room
        with anyio.CancelScope(shield=True):  # what the thread makes is not lost
            made = await rooms.in_worker(rooms.make)
        return made

    async def _fill_rooms(self) -> None:
        rooms = self._rooms
        try:
            while len(rooms.stock) < ROOMS_AHEAD and not self._closed:
                with anyio.CancelScope(shield=True):
                    rooms.stock.append(await rooms.in_worker(rooms.make))
        finally:
            rooms.filling = False
            self._leave()

    async def _free_room_later(self, slot: ChildSlot) -> None:
        try:
            await self._rooms.in_worker(self._rooms.free, slot)
        finally:
            self._leave()

    async def _replenish(self) -> None:
        """Ask for spares up to ``prefork``. Only requests: the template forks them while the
        caller goes on."""
        try:
            template = self._template
            if self._closed or template is None or not template.alive:
                return
            while len(self._spares) < self._prefork and not self._closed:
                try:
                    engine = self._spare_engine
                    self._spares.append(await self._fork(template, spare=True, engine=engine))
                except OSError as exc:
                    _log.warning("dsh-code: cannot fork a spare child: %s", exc)
                    return
        finally:
            self._replenishing = False

    async def aclose(self) -> None:
        """Abort in-flight runs, wait until every child has exited and every resource of the
        runtime is freed (the template, spares, directories, cgroups, threads). Idempotent."""
        self._closed = True
        with anyio.CancelScope(shield=True):
            while self._entered:
                self._idle = anyio.Event()
                for run in list(self._runs):
                    run.abort("the runtime was closed while the run was in flight")
                if self._template is not None and not self._template.ready:
                    await self._template.aclose()  # a start in progress ends now
                for seeded in self._seeded.values():
                    if not seeded.ready:
                        await seeded.aclose()
                await self._idle.wait()
            await self._background.wait()
            for spare in self._spares:
                spare.close()
            if self._template is not None:
                await self._template.aclose()
                self._template = None
            for seeded in self._seeded.values():
                await seeded.aclose()
            self._seeded = {}
            await self._rooms.in_worker(self._rooms.close, self._spares)
            self._spares = []
            await anyio.to_thread.run_sync(self._watchdog.stop)

    def __repr__(self) -> str:
        state = "closed" if self._closed else f"{len(self._runs)} running"
        return f"<SubprocessRuntime isolation={self.isolation!r} {state}>"
