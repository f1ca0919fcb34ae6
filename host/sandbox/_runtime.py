"""``SubprocessRuntime``: the code runtime that runs each program in a fresh forked child."""

from __future__ import annotations

import logging
import marshal
import sys

import anyio

from host.sandbox._cgroup import CgroupSet
from host.sandbox._run import Run, RunOptions, default_workdir_root
from host.sandbox._slot import ChildSlot
from host.sandbox._template import TemplateProcess
from runtime._contract import RunError, RunRequest, RunResult, RunStats
from runtime._errors import RuntimeClosedError, RuntimeUsageError
from runtime._json import json_problem
from runtime._program import Policy, ProgramRejected, compile_program

__all__ = ("SubprocessRuntime",)

_log = logging.getLogger("host.sandbox")
#: Programs longer than this (characters) are compiled in their child, not on our event loop.
_COMPILE_INLINE = 20_000
#: Compiled programs kept per runtime.
_COMPILED_KEPT = 64


def _check_request(request: RunRequest) -> None:
    """Reject what the caller got wrong, before anything starts."""
    if not isinstance(request, RunRequest):
        raise RuntimeUsageError(f"run() takes a RunRequest, got {type(request).__name__}")
    for name in request.bindings:
        parts = name.split(".") if isinstance(name, str) else [""]
        if not all(p.isidentifier() for p in parts):
            raise RuntimeUsageError(f"binding name {name!r} is not a dotted identifier")
        if not callable(request.bindings[name]):
            raise RuntimeUsageError(f"binding {name!r} is not callable")
    for name, value in request.inputs.items():
        if not isinstance(name, str) or not name.isidentifier():
            raise RuntimeUsageError(f"input name {name!r} is not an identifier")
        problem = json_problem(value)
        if problem is not None:
            raise RuntimeUsageError(f"input {name!r} is not lossless JSON: {problem}")


class SubprocessRuntime:
    """Runs each program in a fresh child forked from a template process (Linux only).

    Use ``async with SubprocessRuntime() as rt:`` or call ``aclose()`` when done; the
    template starts on the first run. ``max_concurrent_runs`` bounds runs at once;
    ``prefork`` children are kept forked ahead of time, each used for one run only.
    With ``use_cgroups`` (where the host may create cgroups) each run gets cgroups of
    its own: killed at once, at most ``max_processes`` processes and threads, memory
    capped at ``max_heap_mb`` plus headroom, CPU counted by the kernel.
    """

    language = "python"

    def __init__(
        self,
        *,
        max_concurrent_runs: int = 8,
        max_frame_bytes: int = 64 * 1024 * 1024 + 4096,
        max_file_bytes: int = 256 * 1024 * 1024,
        max_open_files: int = 256,
        prefork: int = 1,
        workdir_root: str | None = None,
        isolation: str = "auto",
        use_cgroups: bool = True,
        max_processes: int = 1024,
        python: str = sys.executable,
    ) -> None:
        if not sys.platform.startswith("linux"):
            raise RuntimeUsageError(
                f"SubprocessRuntime supports Linux only (this is {sys.platform}): it relies on "
                "fork, /proc, prctl and rlimits"
            )
        if max_concurrent_runs < 1:
            raise ValueError("max_concurrent_runs must be at least 1")
        if isolation not in ("auto", "namespaces", "process"):
            raise ValueError(
                f"isolation must be 'auto', 'namespaces' or 'process', not {isolation!r}"
            )
        self._requested_isolation = isolation
        if max_processes < 4:
            raise ValueError("max_processes must be at least 4 (a namespaced child has 3)")
        self._use_cgroups = use_cgroups
        self._max_processes = max_processes
        self._cgroups: CgroupSet | None = None
        self._why_not_cgroups = "" if use_cgroups else "use_cgroups=False"
        if prefork < 0:
            raise ValueError("prefork must be 0 or more")
        self._prefork = prefork
        self._spares: list[ChildSlot] = []
        self._compiled: dict[tuple[str, str], bytes] = {}
        self._options = RunOptions(
            workdir_root=workdir_root or default_workdir_root(),
            max_frame_bytes=max_frame_bytes,
            max_file_bytes=max_file_bytes,
            max_open_files=max_open_files,
        )
        self._max_concurrent = max_concurrent_runs
        self._python = python
        self._template: TemplateProcess | None = None
        self._template_lock: anyio.Lock | None = None
        self._limiter: anyio.CapacityLimiter | None = None
        self._runs: set[Run] = set()
        self._idle: anyio.Event | None = None
        self._closed = False

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
        """What per-run cgroups give runs: some of "kill", "cpu", "pids", "memory" (empty
        without cgroups, or until started)."""
        return self._cgroups.features if self._cgroups is not None else ()

    @property
    def why_not_cgroups(self) -> str:
        """Why runs have no cgroups (empty when they have, or until started)."""
        return self._why_not_cgroups

    async def start(self) -> None:
        """Start the template now (else the first run does); settles ``isolation``."""
        if self._closed:
            raise RuntimeClosedError("this SubprocessRuntime is closed; create a new one")
        await self._ensure_template()
        await self._replenish()

    async def __aenter__(self) -> SubprocessRuntime:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def run(self, request: RunRequest) -> RunResult:
        """Run one program in a fresh child; resolves with the result whatever the program did."""
        if self._closed:
            raise RuntimeClosedError("this SubprocessRuntime is closed; create a new one")
        _check_request(request)
        try:
            code = await self._compile(request.program, request.policy)
        except ProgramRejected as exc:
            return self._early(RunError(kind="parse", message=exc.message, lineno=exc.lineno))
        if request.abort is not None and request.abort.is_set():
            return self._early(
                RunError(kind="aborted", message="the run was aborted before it started")
            )
        if self._limiter is None:
            self._limiter = anyio.CapacityLimiter(self._max_concurrent)
        limiter = self._limiter
        if limiter.available_tokens >= 1:
            limiter.acquire_nowait()  # no checkpoint: an idle runtime starts the run at once
        else:
            await limiter.acquire()
        try:
            if self._closed:
                raise RuntimeClosedError("this SubprocessRuntime closed while the run was waiting")
            template = await self._ensure_template()
            slot = await self._take_slot(template)
            run = Run(request, code, slot, self._options)
            self._runs.add(run)
            try:
                return await run.execute()
            finally:
                self._release(slot)
                self._runs.discard(run)
                if not self._runs and self._idle is not None:
                    self._idle.set()
                with anyio.CancelScope(shield=True):
                    await self._replenish()
        finally:
            limiter.release()

    async def _compile(self, program: str, policy: Policy) -> bytes:
        """The marshalled code of ``program`` (b"": the child compiles it); the last few are
        kept, as agents repeat programs. Raises ``ProgramRejected``."""
        key = (program, policy)
        code = self._compiled.get(key)
        if code is not None:
            self._compiled[key] = self._compiled.pop(key)  # most recently used last
            return code
        if len(program) > _COMPILE_INLINE:
            # Compiling holds the GIL for as long as it takes (a thread would not help): a
            # long program is compiled by its child, which reports a failure as `parse`.
            return b""
        code = marshal.dumps(compile_program(program, policy))
        self._compiled[key] = code
        if len(self._compiled) > _COMPILED_KEPT:
            del self._compiled[next(iter(self._compiled))]
        return code

    def _early(self, error: RunError) -> RunResult:
        stats = RunStats(
            isolation=self.isolation, compute_ms=0.0, wall_ms=0.0, calls=0, dropped_frames=0
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
                template = TemplateProcess(self._python, self._requested_isolation)
                await template.start()
                self._template = template
                if self._use_cgroups and self._cgroups is None:
                    # off the event loop: the first time, a probe process has to start
                    self._cgroups, why_not = await anyio.to_thread.run_sync(
                        CgroupSet.create, self._max_processes
                    )
                    self._why_not_cgroups = why_not
                    if self._cgroups is None:
                        _log.info("dsh-code: runs go without cgroups: %s", why_not)
                if self._requested_isolation == "auto" and template.isolation != "namespaces":
                    _log.warning(
                        "dsh-code: namespaces are not available (%s); runs use the process level",
                        template.why_not_namespaces,
                    )
            return self._template

    async def _take_slot(self, template: TemplateProcess) -> ChildSlot:
        """A spare child if one is ready, else a fresh fork."""
        slot = None
        while self._spares and slot is None:
            spare = self._spares.pop(0)
            if spare.template is template and not spare.stale():
                slot = spare
            else:
                spare.discard()
                self._release(spare)
                spare.remove_workdir()
        if slot is None:
            slot = await self._fork(template, spare=False)
        return slot

    async def _fork(self, template: TemplateProcess, *, spare: bool) -> ChildSlot:
        """A new child slot, in fresh cgroups when we have them. A ``spare`` warms up while
        it waits; a child forked for a run now goes straight to it."""
        cgroup = None
        if self._cgroups is not None:
            try:
                cgroup = self._cgroups.new_run()
            except OSError as exc:
                _log.warning("dsh-code: a run goes without cgroups: %s", exc)
        try:
            return await ChildSlot.fork(
                template,
                workdir_root=self._options.workdir_root,
                file_bytes=self._options.max_file_bytes,
                open_files=self._options.max_open_files,
                warm_up=spare,
                cgroup=cgroup,
            )
        except BaseException:
            if cgroup is not None and self._cgroups is not None:
                self._cgroups.release(cgroup)
            raise

    def _release(self, slot: ChildSlot) -> None:
        if slot.cgroup is not None and self._cgroups is not None:
            self._cgroups.release(slot.cgroup)
            slot.cgroup = None

    async def _replenish(self) -> None:
        """Ask for spares up to ``prefork``. Only requests: the template forks them while we
        wait for the model. Asked after a run, not during it, so the fork and the spare's
        set-up do not compete with a running program for the CPU."""
        template = self._template
        if self._closed or template is None or not template.alive:
            return
        while len(self._spares) < self._prefork:
            self._spares.append(await self._fork(template, spare=True))

    async def aclose(self) -> None:
        """Abort in-flight runs, wait until every child has exited, stop the template."""
        self._closed = True
        if self._runs:
            self._idle = anyio.Event()
            for run in list(self._runs):
                run.abort("the runtime was closed while the run was in flight")
            with anyio.CancelScope(shield=True):
                await self._idle.wait()
        for spare in self._spares:
            spare.close()
        if self._template is not None:
            with anyio.CancelScope(shield=True):
                await self._template.aclose()
            self._template = None
        for spare in self._spares:
            self._release(spare)
            spare.remove_workdir()
        self._spares = []
        if self._cgroups is not None:
            self._cgroups.close()

    def __repr__(self) -> str:
        state = "closed" if self._closed else f"{len(self._runs)} running"
        return f"<SubprocessRuntime isolation={self.isolation!r} {state}>"
