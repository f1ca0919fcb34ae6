"""``RayRuntime``: a ``CodeRuntime`` whose programs run on the nodes of a Ray cluster."""

from __future__ import annotations

import inspect
import itertools
import logging
from collections.abc import Mapping
from typing import Any

import anyio
import msgspec

from host.cluster._exceptions import ClusterError
from host.cluster._pool import Node, NodePool
from host.cluster._ray import RayBackend, wait_future
from host.cluster._run import ClusterRun, NotStarted
from host.cluster._stats import ClusterRunStats
from host.telemetry import trace_run
from runtime import Decision, Journal, RunError, RunRequest, RunResult, RuntimeClosedError
from runtime.lowlevel import CallLedger, check_request, json_problem

__all__ = ("RayRuntime", "ray_runtime_from_flag")

_log = logging.getLogger("host.cluster")
#: Seconds ``aclose()`` gives a node's actor to close its runtime before it is killed.
_CLOSE_S = 10.0


def _checked_options(runtime_options: Mapping[str, Any] | None) -> bytes:
    """``runtime_options`` as JSON, once ``SubprocessRuntime`` has accepted them here."""
    from host.sandbox import SubprocessRuntime

    options = dict(runtime_options or {})
    known = inspect.signature(SubprocessRuntime).parameters
    for name in options:
        if name not in known:
            raise ValueError(
                f"runtime_options: SubprocessRuntime has no option {name!r} "
                f"(it takes {', '.join(sorted(known))})"
            )
    problem = json_problem(options)
    if problem is not None:
        raise ValueError(f"runtime_options must be JSON to reach the nodes: {problem}")
    SubprocessRuntime(**options)  # raises for a bad value; it starts nothing until a run
    return msgspec.json.encode(options)


class RayRuntime:
    """Runs each program in a fresh contained child on some node of a Ray cluster.

    Each node gets one actor owning a ``SubprocessRuntime(**runtime_options)``; a run goes
    to the node with the fewest runs in flight, up to ``runs_per_node`` (default: the
    runtime's ``max_concurrent_runs``), and queues here past that. Binding calls come back
    to this process: bindings stay plain async callables here; only JSON crosses.
    """

    language = "python"

    def __init__(
        self,
        address: str | None = None,
        *,
        runs_per_node: int | None = None,
        runtime_options: Mapping[str, Any] | None = None,
        init_options: Mapping[str, Any] | None = None,
        start_timeout_s: float = 120.0,
        refresh_s: float = 5.0,
        unresponsive_s: float = 15.0,
        retry_s: float = 30.0,
    ) -> None:
        if runs_per_node is not None and (type(runs_per_node) is not int or runs_per_node < 1):
            raise ValueError(f"runs_per_node must be a positive int, got {runs_per_node!r}")
        for name, value in (
            ("start_timeout_s", start_timeout_s),
            ("refresh_s", refresh_s),
            ("unresponsive_s", unresponsive_s),
            ("retry_s", retry_s),
        ):
            if not isinstance(value, int | float) or not value > 0:
                raise ValueError(f"{name} must be a positive number of seconds, got {value!r}")
        self._options_json = _checked_options(runtime_options)
        self._requested_isolation = str(dict(runtime_options or {}).get("isolation", "auto"))
        self._address = address
        self._init_options = dict(init_options or {})
        self._start_timeout_s = float(start_timeout_s)
        self._unresponsive_s = float(unresponsive_s)
        self._backend = RayBackend()  # imports Ray: ClusterError if it is not installed
        self._pool = NodePool(
            self._backend,
            runtime_options=self._options_json,
            runs_per_node=runs_per_node,
            refresh_s=float(refresh_s),
            start_timeout_s=float(start_timeout_s),
            retry_s=float(retry_s),
        )
        self._run_ids = itertools.count(1)
        self._runs: set[ClusterRun] = set()
        self._connected = False
        self._connect_lock: anyio.Lock | None = None
        self._closed = False

    @property
    def isolation(self) -> str:
        """The weakest isolation level of the ready nodes ("namespaces" or "process"); the
        requested one ("auto") until a node is ready."""
        levels = {n.info.isolation for n in self._pool.ready_nodes() if n.info is not None}
        if not levels:
            return self._requested_isolation
        return "process" if "process" in levels else sorted(levels)[0]

    @property
    def nodes(self) -> tuple[str, ...]:
        """The ids of the nodes that take runs now."""
        return tuple(n.node_id for n in self._pool.ready_nodes())

    async def start(self) -> None:
        """Connect, and start an actor on every node (else the first run does)."""
        if self._closed:
            raise RuntimeClosedError("this RayRuntime is closed; create a new one")
        await self._connect()
        await self._pool.start()

    async def __aenter__(self) -> RayRuntime:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def _connect(self) -> None:
        if self._connected:
            return
        if self._connect_lock is None:
            self._connect_lock = anyio.Lock()
        async with self._connect_lock:
            if self._connected:
                return
            try:
                with anyio.fail_after(self._start_timeout_s):
                    await anyio.to_thread.run_sync(
                        self._backend.connect,
                        self._address,
                        self._init_options,
                        abandon_on_cancel=True,
                    )
            except TimeoutError:
                raise ClusterError(
                    f"cannot connect to the Ray cluster at {self._address or 'the default address'}"
                    f" within {self._start_timeout_s:g} s"
                ) from None
            self._connected = True

    async def run(
        self,
        request: RunRequest,
        *,
        resume: Journal | None = None,
        decisions: Mapping[str, Decision] | None = None,
    ) -> RunResult:
        """Run one program on some node; resolves with the result whatever the program did
        (``resume``: a journal to replay first, on whichever node takes the run)."""
        if self._closed:
            raise RuntimeClosedError("this RayRuntime is closed; create a new one")
        check_request(request)
        # the journal is checked here (the node checks it again): a misfit is the caller's
        ledger = CallLedger(request, resume=resume, decisions=decisions)
        with trace_run(self, request) as traced:
            result = await self._run(traced.request, resume, decisions)
            result = result if result.journal is not None else ledger.finish(result)
            traced.end(result)
        return result

    async def _run(
        self,
        request: RunRequest,
        resume: Journal | None,
        decisions: Mapping[str, Decision] | None,
    ) -> RunResult:
        if not self._connected:
            await self._connect()
        if request.abort is not None and request.abort.is_set():
            return self._early(
                RunError(kind="aborted", message="the run was aborted before it started")
            )
        node = await self._pool.acquire()
        if request.abort is not None and request.abort.is_set():  # while it waited its turn
            self._pool.release(node)
            return self._early(
                RunError(kind="aborted", message="the run was aborted before it started")
            )
        outcome = await self._run_on(node, request, None, resume, decisions)
        if isinstance(outcome, NotStarted):
            # it never started there: once more, on another node
            first = node
            try:
                node = await self._pool.acquire(exclude=(first.node_id,))
            except ClusterError as exc:
                return self._early(
                    RunError(
                        kind="died",
                        message=f"the node {first.label} was lost before the run started "
                        f"({outcome.why}), and no other node could take it: {exc}",
                    ),
                    node=first.node_id,
                )
            outcome = await self._run_on(node, request, first.node_id, resume, decisions)
            if isinstance(outcome, NotStarted):
                return self._early(
                    RunError(
                        kind="died",
                        message=f"the node {node.label} was lost before the run started "
                        f"({outcome.why}), after {first.label} was too",
                    ),
                    node=node.node_id,
                    retried_from=first.node_id,
                )
        return outcome

    async def _run_on(
        self,
        node: Node,
        request: RunRequest,
        retried_from: str | None,
        resume: Journal | None,
        decisions: Mapping[str, Decision] | None,
    ) -> RunResult | NotStarted:
        run = ClusterRun(
            request,
            node,
            self._backend,
            next(self._run_ids),
            unresponsive_s=self._unresponsive_s,
            retried_from=retried_from,
            resume=resume,
            decisions=decisions,
        )
        self._runs.add(run)
        try:
            if self._closed:
                raise RuntimeClosedError("this RayRuntime closed while the run was waiting")
            outcome = await run.execute()
        finally:
            self._runs.discard(run)
            self._pool.release(node)
        if run.lost_node:
            self._pool.fail(node, f"a run there was lost: {run.lost_node}")
        return outcome

    def _early(
        self, error: RunError, *, node: str | None = None, retried_from: str | None = None
    ) -> RunResult:
        stats = ClusterRunStats(
            isolation=self.isolation,
            compute_ms=0.0,
            wall_ms=0.0,
            calls=0,
            dropped_frames=0,
            node=node,
            retried_from=retried_from,
        )
        return RunResult(logs=[], error=error, stats=stats)

    async def aclose(self) -> None:
        """Abort in-flight runs, wait until they have ended, close every node's actor."""
        self._closed = True
        with anyio.CancelScope(shield=True):
            for run in list(self._runs):
                run.abort("the runtime was closed while the run was in flight")
            with anyio.move_on_after(self._unresponsive_s + _CLOSE_S):
                while self._runs:
                    await anyio.sleep(0.01)
            nodes, listing = self._pool.close()
            with anyio.move_on_after(_CLOSE_S):
                for node in nodes:
                    try:
                        await wait_future(self._backend.close_actor(node.actor))
                    except Exception as exc:  # the node is gone: its children went with it
                        _log.info("dsh-code: closing %s: %s", node.label, exc)
            for node in nodes:
                self._backend.kill(node.actor)
            if self._backend.owns_connection and self._connected:
                if listing is not None:  # a thread still asks Ray for its nodes
                    with anyio.move_on_after(_CLOSE_S):
                        await wait_future(listing)
                await anyio.to_thread.run_sync(self._backend.shutdown)
                self._connected = False

    def __repr__(self) -> str:
        state = "closed" if self._closed else f"{len(self._runs)} running"
        return f"<RayRuntime nodes={len(self._pool.ready_nodes())} {state}>"


def ray_runtime_from_flag(
    address: str, runtime_options: Mapping[str, Any] | None = None
) -> RayRuntime:
    """The ``RayRuntime`` for the CLI's ``--ray ADDRESS`` (``auto``: the cluster Ray finds
    from ``RAY_ADDRESS`` or the one ``ray start`` made on this machine). Raises
    ``ClusterError`` for an address it cannot use or when Ray is not installed."""
    address = address.strip()
    if not address:
        raise ClusterError("--ray needs an address: host:port of the cluster's head, or auto")
    if address.startswith("ray://"):
        raise ClusterError(
            f"--ray {address}: Ray Client addresses (ray://) are not supported; run dsh-code "
            "on a node of the cluster and give the head's host:port, or auto"
        )
    try:
        return RayRuntime(address, runtime_options=runtime_options)
    except ValueError as exc:
        raise ClusterError(str(exc)) from exc
