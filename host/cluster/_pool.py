"""The caller's view of the cluster: one actor per node, which node takes the next run.

Nothing here waits on Ray: the node listing runs on a worker thread and actors start
remotely; each look (``_update``) takes in whatever has finished since. A run goes to
the ready node with the fewest runs in flight (the least recently used among equals),
up to its capacity; past every node's capacity, runs wait in arrival order.
"""

from __future__ import annotations

import concurrent.futures
import logging
import math
import time
from collections.abc import Callable, Collection
from typing import Any, Protocol

import anyio

from host.cluster._exceptions import ClusterError
from host.cluster._ray import NodeRecord
from host.cluster._wire import PROTOCOL, NodeInfo, decode_info, forwarded_fields
from runtime import RuntimeClosedError

__all__ = ("Backend", "Node", "NodePool")

_log = logging.getLogger("host.cluster")
#: How often a waiting run looks again at starting nodes and a pending listing (seconds).
_POLL_S = 0.05


class Backend(Protocol):
    """The part of ``RayBackend`` the pool uses (a fake in unit tests)."""

    def list_nodes(self) -> list[NodeRecord]: ...

    def create_actor(self, node_id: str, runtime_options: bytes) -> Any: ...

    def ready(self, actor: Any) -> concurrent.futures.Future[bytes]: ...

    def kill(self, actor: Any) -> None: ...


class Node:
    """One node with its actor: starting, then ready (``info``) or failed (``failure``)."""

    def __init__(self, record: NodeRecord, actor: Any, ready: concurrent.futures.Future[bytes]):
        self.record = record
        self.actor = actor
        self.ready = ready
        self.info: NodeInfo | None = None
        self.failure: str | None = None
        self.capacity = 0
        self.in_flight = 0
        self.last_used = 0

    @property
    def node_id(self) -> str:
        return self.record.node_id

    @property
    def label(self) -> str:
        """How messages name the node: its address and the start of its id."""
        where = self.record.address or self.record.host or "?"
        return f"{where} (node {self.node_id[:12]})"

    def __repr__(self) -> str:
        state = "failed" if self.failure else "ready" if self.info else "starting"
        return f"<Node {self.label} {state} {self.in_flight}/{self.capacity}>"


class NodePool:
    """Nodes, their actors, and the queue of runs waiting for room on one of them."""

    def __init__(
        self,
        backend: Backend,
        *,
        runtime_options: bytes,
        runs_per_node: int | None,
        refresh_s: float,
        start_timeout_s: float,
        retry_s: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._backend = backend
        self._runtime_options = runtime_options
        self._runs_per_node = runs_per_node
        self._refresh_s = refresh_s
        self._start_timeout_s = start_timeout_s
        self._retry_s = retry_s
        self._clock = clock
        self.nodes: dict[str, Node] = {}
        self._failed: dict[str, tuple[float, str]] = {}  # node id -> (when, why)
        self._listing: concurrent.futures.Future[list[NodeRecord]] | None = None
        self._listed_at = -math.inf
        self._listed_once = False
        self._listing_error: str | None = None
        self._executor: concurrent.futures.ThreadPoolExecutor | None = None
        self._queue: anyio.Lock | None = None
        self._changed: anyio.Event | None = None
        self._tick = 0
        self._closed = False

    # ---- looking at the cluster ----------------------------------------------------------

    def _update(self) -> None:
        """Take in a finished listing and ready actors; ask for a new listing when due."""
        if self._closed:
            return
        listing = self._listing
        if listing is not None and listing.done():
            self._listing = None
            self._listed_at = self._clock()
            try:
                records = listing.result()
            except Exception as exc:
                self._listing_error = f"cannot list the cluster's nodes: {exc}"
                _log.warning("dsh-code: %s", self._listing_error)
            else:
                self._listing_error = None
                self._listed_once = True
                self._apply(records)
        if self._listing is None and self._clock() - self._listed_at >= self._refresh_s:
            if self._executor is None:
                self._executor = concurrent.futures.ThreadPoolExecutor(
                    max_workers=1, thread_name_prefix="dsh-code-ray-nodes"
                )
            self._listing = self._executor.submit(self._backend.list_nodes)
        for node in list(self.nodes.values()):
            if node.info is None and node.failure is None and node.ready.done():
                self._promote(node)

    def _apply(self, records: list[NodeRecord]) -> None:
        alive = {r.node_id: r for r in records if r.alive}
        for node_id, node in list(self.nodes.items()):
            if node_id not in alive:
                self.fail(node, "the node left the cluster")
        now = self._clock()
        for node_id, record in alive.items():
            if node_id in self.nodes:
                continue
            failed = self._failed.get(node_id)
            if failed is not None and now - failed[0] < self._retry_s:
                continue
            actor = self._backend.create_actor(node_id, self._runtime_options)
            self.nodes[node_id] = Node(record, actor, self._backend.ready(actor))

    def _promote(self, node: Node) -> None:
        try:
            info = decode_info(node.ready.result())
        except Exception as exc:
            self.fail(node, f"its actor did not start: {_one_line(exc)}")
            return
        if info.protocol != PROTOCOL or tuple(info.fields) != forwarded_fields():
            self.fail(node, "it runs another version of dsh-code")
            return
        node.info = info
        node.capacity = self._runs_per_node or info.max_concurrent_runs
        self._wake()

    def fail(self, node: Node, why: str) -> None:
        """Stop using ``node`` (its runs in flight end on their own); its actor is killed,
        and a new one is tried after ``retry_s`` if the node is still listed."""
        if node.failure is not None:
            return
        node.failure = why
        if self.nodes.get(node.node_id) is node:
            del self.nodes[node.node_id]
        self._failed[node.node_id] = (self._clock(), why)
        _log.warning("dsh-code: not using %s: %s", node.label, why)
        self._backend.kill(node.actor)
        self._wake()

    def ready_nodes(self) -> list[Node]:
        """The nodes that take runs now."""
        return [n for n in self.nodes.values() if n.info is not None]

    # ---- placing runs ------------------------------------------------------------------

    def _pick(self, exclude: Collection[str]) -> Node | None:
        best: Node | None = None
        for node in self.nodes.values():
            if node.info is None or node.in_flight >= node.capacity or node.node_id in exclude:
                continue
            if best is None or (node.in_flight, node.last_used) < (best.in_flight, best.last_used):
                best = node
        if best is not None:
            self._tick += 1
            best.last_used = self._tick
            best.in_flight += 1
        return best

    async def acquire(self, exclude: Collection[str] = ()) -> Node:
        """A node with room for one more run (queued in arrival order while there is none).
        Raises ``ClusterError`` when no node could take it for ``start_timeout_s``, and
        ``RuntimeClosedError`` once the pool is closed."""
        self._update()
        if self._queue is None:
            self._queue = anyio.Lock()
        if not self._queue.locked():
            node = self._pick(exclude)
            if node is not None:
                return node
        async with self._queue:
            since = self._clock()
            while True:
                if self._closed:
                    raise RuntimeClosedError("this RayRuntime closed while the run was waiting")
                self._update()
                node = self._pick(exclude)
                if node is not None:
                    return node
                usable = [n for n in self.nodes.values() if n.node_id not in exclude]
                if any(n.info is not None for n in usable):
                    since = self._clock()  # busy, not broken: wait as long as it takes
                elif self._listed_once and not usable:
                    raise ClusterError(self._why_no_node())  # every listed node failed
                elif self._clock() - since >= self._start_timeout_s:
                    raise ClusterError(self._why_no_node())
                self._changed = anyio.Event()
                with anyio.move_on_after(_POLL_S):
                    await self._changed.wait()

    def release(self, node: Node) -> None:
        """A run on ``node`` has ended."""
        node.in_flight -= 1
        self._wake()

    def _wake(self) -> None:
        if self._changed is not None:
            self._changed.set()

    async def start(self) -> None:
        """Until every listed node is ready or failed; ``ClusterError`` if none is ready."""
        since = self._clock()
        while True:
            self._update()
            settled = self._listed_once and all(n.info is not None for n in self.nodes.values())
            if settled and self.nodes:
                return
            if self._listed_once and not self.nodes and self._listing is None:
                raise ClusterError(self._why_no_node())
            if self._clock() - since >= self._start_timeout_s:
                if self.ready_nodes():
                    return  # some are still starting: they join when ready
                raise ClusterError(self._why_no_node())
            await anyio.sleep(_POLL_S)

    def _why_no_node(self) -> str:
        parts = [f"{n.label}: still starting" for n in self.nodes.values() if n.info is None]
        parts += [f"node {node_id[:12]}: {why}" for node_id, (_, why) in self._failed.items()]
        if self._listing_error:
            parts.append(self._listing_error)
        detail = "; ".join(parts) if parts else "the cluster lists no live node"
        return f"no node of the Ray cluster could take runs within {self._start_timeout_s:g} s ({detail})"

    def close(self) -> tuple[list[Node], concurrent.futures.Future[list[NodeRecord]] | None]:
        """Forget every node and stop the listing thread; returns the nodes (the caller
        closes their actors) and the listing still under way, if any (to wait for before
        Ray is shut down)."""
        self._closed = True
        self._wake()
        nodes = list(self.nodes.values())
        self.nodes = {}
        listing, self._listing = self._listing, None
        if self._executor is not None:
            self._executor.shutdown(wait=False, cancel_futures=True)
            self._executor = None
        return nodes, listing


def _one_line(exc: BaseException) -> str:
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    text = f"{type(exc).__name__}: {lines[-1] if lines else ''}".rstrip(": ")
    return text if len(text) <= 300 else text[:297] + "..."
