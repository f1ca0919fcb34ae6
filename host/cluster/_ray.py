"""The one door to Ray: import it, connect, list nodes, place actors, talk to them.

Ray is imported lazily (``import_ray``), and only by this module; everything it hands
out is typed ``Any``. Waiting on Ray works under asyncio and trio alike: Ray completes
futures on its own threads, and a thread-safe call wakes the caller's event loop.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import importlib
import logging
import os
import socket
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import anyio
import msgspec

from host.cluster._exceptions import ClusterError

__all__ = (
    "NodeRecord",
    "RayBackend",
    "error_text",
    "import_ray",
    "soon_caller",
    "threadsafe_caller",
    "wait_future",
)

_log = logging.getLogger("host.cluster")
_INSTALL = "pip install 'dsh-code[ray]'"
#: Seconds a GCS address may take to accept a TCP connection before we say it is not there.
_PROBE_S = 5.0
#: Concurrent calls a node's actor serves (runs in flight plus replies, pings, aborts).
_ACTOR_CONCURRENCY = 10_000


def import_ray() -> Any:
    """The ``ray`` module, or ``ClusterError`` saying how to install it."""
    try:
        return importlib.import_module("ray")
    except ImportError as exc:
        raise ClusterError(f"Ray is not installed ({exc}): {_INSTALL}") from exc


class NodeRecord(msgspec.Struct, frozen=True, kw_only=True):
    """One node of the cluster, as Ray lists it."""

    node_id: str
    address: str
    host: str
    alive: bool


def threadsafe_caller() -> Callable[[Callable[[], object]], None]:
    """A function that runs a callback soon on the current event loop, from any thread."""
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        import trio

        token = trio.lowlevel.current_trio_token()

        def on_trio(callback: Callable[[], object]) -> None:
            with contextlib.suppress(trio.RunFinishedError):
                token.run_sync_soon(callback)

        return on_trio

    def on_asyncio(callback: Callable[[], object]) -> None:
        with contextlib.suppress(RuntimeError):  # the loop is closed: nobody waits any more
            loop.call_soon_threadsafe(callback)

    return on_asyncio


def soon_caller() -> Callable[[Callable[[], object]], None]:
    """A function that runs a callback soon on the current event loop, from its own thread
    (under asyncio without the wake-up a call from another thread needs)."""
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        return threadsafe_caller()

    def on_asyncio(callback: Callable[[], object]) -> None:
        loop.call_soon(callback)

    return on_asyncio


async def wait_future(future: concurrent.futures.Future[Any]) -> Any:
    """The result of ``future`` (completed on some other thread), without blocking the loop.
    Cancelling the wait leaves the future alone."""
    if not future.done():
        done = anyio.Event()
        call_soon = threadsafe_caller()
        future.add_done_callback(lambda _: call_soon(done.set))
        await done.wait()
    return future.result()


class _QuietSigterm(logging.Filter):
    """Drops Ray's note that ``ray.init`` off the main thread leaves SIGTERM alone: we call
    it there on purpose, so the caller's own SIGTERM handling stays."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "SIGTERM handler is not set" not in record.getMessage()


def _probe(address: str) -> None:
    """Fail fast when ``host:port`` accepts no connection (``ray.init`` would retry for
    minutes)."""
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit():
        return  # "auto", a cluster name: Ray resolves it
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=_PROBE_S):
            pass
    except OSError as exc:
        raise ClusterError(f"cannot reach the Ray cluster at {address}: {exc}") from exc


def _recorded_address() -> tuple[str, str] | None:
    """The cluster a ``ray start`` on this machine recorded (its file, its address)."""
    try:
        utils = importlib.import_module("ray._private.utils")
        path = str(utils.get_ray_address_file(None))
        recorded = utils.read_ray_address(None)
    except (ImportError, AttributeError, OSError):  # another Ray's internals: let Ray look
        return None
    return (path, str(recorded)) if recorded else None


def _usable(address: str | None) -> str | None:
    """``address`` checked before ``ray.init`` sees it: an address nobody listens on fails at
    once, and for ``None`` a stale record of a ``ray start`` that was never stopped (Ray would
    retry it for minutes) gives way to a new local cluster."""
    if address is not None and address != "auto":
        _probe(address)
        return address
    if os.environ.get("RAY_ADDRESS"):
        _probe(os.environ["RAY_ADDRESS"])
        return address
    recorded = _recorded_address()
    if recorded is None:
        return address
    path, found = recorded
    try:
        _probe(found)
    except ClusterError:
        if address == "auto":
            raise ClusterError(
                f"no Ray cluster listens at {found}, the address {path} records (a ray start "
                "that ended without ray stop?): start the cluster, or pass its address"
            ) from None
        _log.warning(
            "no Ray cluster listens at %s (recorded in %s): starting one here", found, path
        )
        return "local"
    return address


class RayBackend:
    """What ``RayRuntime`` asks of Ray; one per runtime, safe to call from its event loop."""

    def __init__(self) -> None:
        self.ray = import_ray()
        self._actor_class: Any = None
        self.owns_connection = False
        self._restore: Callable[[], None] = lambda: None

    # ---- the connection ----------------------------------------------------------------

    def connect(self, address: str | None, init_options: Mapping[str, Any]) -> None:
        """``ray.init`` unless this process is connected already (blocking: call it in a
        worker thread)."""
        ray = self.ray
        if ray.is_initialized():
            return
        address = _usable(address)
        options = {"logging_level": "warning", "log_to_driver": False, **init_options}
        quiet = _QuietSigterm()
        worker_log = logging.getLogger("ray._private.worker")
        worker_log.addFilter(quiet)
        try:
            ray.init(address=address, **options)
        except ClusterError:
            raise
        except Exception as exc:
            raise ClusterError(f"cannot connect to the Ray cluster at {address}: {exc}") from exc
        finally:
            worker_log.removeFilter(quiet)
        self.owns_connection = True
        self._quiet_cluster_errors()

    def _quiet_cluster_errors(self) -> None:
        """Send the cluster's error messages (a node died, ...) to our logger, not stdout.

        A Ray driver prints them to ``sys.stdout`` from a thread of its own (and on the
        way replaces ``builtins.print``), whatever ``log_to_driver`` says: that would
        corrupt the stdout of ``dsh-code run --json`` and the MCP channel of ``dsh-code
        mcp``. The thread looks the printer up in Ray's worker module at each message.
        """
        worker: Any = importlib.import_module("ray._private.worker")
        original = worker.print_to_stdstream

        def to_log(data: dict[str, Any], ignore_prefix: bool) -> None:
            for text in data.get("lines", []):
                first, _, rest = str(text).strip().partition("\n")
                _log.warning("dsh-code: the Ray cluster says (%s): %s", data.get("pid"), first)
                if rest:
                    _log.debug("%s", rest)

        worker.print_to_stdstream = to_log
        self._restore = lambda: setattr(worker, "print_to_stdstream", original)

    def connected(self) -> bool:
        """True while this process has a Ray connection."""
        return bool(self.ray.is_initialized())

    def shutdown(self) -> None:
        """``ray.shutdown()`` (blocking), and Ray's own printer back."""
        self.ray.shutdown()
        self._restore()

    # ---- nodes and actors ----------------------------------------------------------------

    def list_nodes(self) -> list[NodeRecord]:
        """Every node Ray knows, alive or not (blocking: a GCS round trip)."""
        return [
            NodeRecord(
                node_id=str(n["NodeID"]),
                address=str(n.get("NodeManagerAddress", "")),
                host=str(n.get("NodeManagerHostname", "")),
                alive=bool(n.get("Alive")),
            )
            for n in self.ray.nodes()
        ]

    def create_actor(self, node_id: str, runtime_options: bytes) -> Any:
        """A new ``NodeActor`` pinned to ``node_id`` (returns at once; it starts remotely)."""
        if self._actor_class is None:
            from host.cluster._actor import NodeActor

            self._actor_class = self.ray.remote(NodeActor)
        strategies = importlib.import_module("ray.util.scheduling_strategies")
        return self._actor_class.options(
            num_cpus=0,  # the children's CPU is not Ray's to count: runs_per_node bounds it
            scheduling_strategy=strategies.NodeAffinitySchedulingStrategy(node_id, soft=False),
            max_concurrency=_ACTOR_CONCURRENCY,
            max_restarts=0,
            max_task_retries=0,
        ).remote(runtime_options)

    def ready(self, actor: Any) -> concurrent.futures.Future[bytes]:
        """The actor's ``NodeInfo`` once its runtime has started."""
        future: concurrent.futures.Future[bytes] = actor.ready.remote().future()
        return future

    def ping(self, actor: Any) -> concurrent.futures.Future[bytes]:
        """Completes when the actor answers."""
        future: concurrent.futures.Future[bytes] = actor.ping.remote().future()
        return future

    def close_actor(self, actor: Any) -> concurrent.futures.Future[None]:
        """Completes when the actor has closed its runtime (every child exited)."""
        future: concurrent.futures.Future[None] = actor.close.remote().future()
        return future

    def kill(self, actor: Any) -> None:
        """Kill the actor (its template and children die with it)."""
        with contextlib.suppress(Exception):  # gone already
            self.ray.kill(actor, no_restart=True)

    # ---- runs --------------------------------------------------------------------------

    def start(self, actor: Any, run_id: int, submission: bytes) -> concurrent.futures.Future[bytes]:
        """Send one run to the actor; completes with the run's first batch of events."""
        future: concurrent.futures.Future[bytes] = actor.start.remote(run_id, submission).future()
        return future

    def exchange(self, actor: Any, run_id: int, replies: bytes) -> concurrent.futures.Future[bytes]:
        """Send replies (maybe none); completes with the run's next batch of events."""
        future: concurrent.futures.Future[bytes] = actor.exchange.remote(run_id, replies).future()
        return future

    def reply(self, actor: Any, run_id: int, replies: bytes) -> None:
        """Send binding replies alone (fire and forget: a lost one shows as a lost node)."""
        actor.reply.remote(run_id, replies)

    def abort(self, actor: Any, run_id: int) -> None:
        """Ask the actor to abort a run (fire and forget)."""
        actor.abort.remote(run_id)

    def is_task_error(self, exc: BaseException) -> bool:
        """True when ``exc`` is an exception raised by the actor's method (the actor lives on),
        not the actor's or its node's death."""
        return isinstance(exc, self.ray.exceptions.RayTaskError)


def error_text(exc: BaseException) -> str:
    """A one-line account of a Ray error."""
    lines: Iterator[str] = (line.strip() for line in str(exc).splitlines())
    first = next((line for line in lines if line), "")
    text = f"{type(exc).__name__}: {first}" if first else type(exc).__name__
    return text if len(text) <= 300 else text[:297] + "..."
