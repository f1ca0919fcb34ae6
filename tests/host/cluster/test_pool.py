"""NodePool with a fake Ray: placement, capacity, the queue, nodes that join, fail or leave."""

from __future__ import annotations

import concurrent.futures
from typing import Any

import anyio
import pytest

from host.cluster import ClusterError
from host.cluster._pool import Node, NodePool
from host.cluster._ray import NodeRecord
from host.cluster._wire import PROTOCOL, NodeInfo, encode, forwarded_fields
from runtime import RuntimeClosedError

pytestmark = pytest.mark.anyio


def _info(node_id: str, *, capacity: int = 8, protocol: int = PROTOCOL) -> bytes:
    return encode(
        NodeInfo(
            protocol=protocol,
            fields=list(forwarded_fields()),
            node_id=node_id,
            host="host-" + node_id,
            address="10.0.0." + node_id[-1],
            pid=1,
            isolation="namespaces",
            why_not_namespaces="",
            cgroups=[],
            max_concurrent_runs=capacity,
        )
    )


class FakeRay:
    """Nodes listed at once; each actor's ``ready`` is a future the test completes."""

    def __init__(self, *node_ids: str) -> None:
        self.listed = [NodeRecord(node_id=n, address="", host="", alive=True) for n in node_ids]
        self.ready_futures: dict[str, concurrent.futures.Future[bytes]] = {}
        self.created: list[str] = []
        self.killed: list[str] = []
        self.listings = 0

    def list_nodes(self) -> list[NodeRecord]:
        self.listings += 1
        return list(self.listed)

    def create_actor(self, node_id: str, runtime_options: bytes) -> Any:
        self.created.append(node_id)
        self.ready_futures[node_id] = concurrent.futures.Future()
        return node_id

    def ready(self, actor: Any) -> concurrent.futures.Future[bytes]:
        return self.ready_futures[actor]

    def kill(self, actor: Any) -> None:
        self.killed.append(actor)

    def make_ready(self, node_id: str, **kwargs: Any) -> None:
        self.ready_futures[node_id].set_result(_info(node_id, **kwargs))


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _pool(fake: FakeRay, clock: Clock | None = None, **kwargs: Any) -> NodePool:
    options: dict[str, Any] = {
        "runtime_options": b"{}",
        "runs_per_node": None,
        "refresh_s": 5.0,
        "start_timeout_s": 30.0,
        "retry_s": 30.0,
        **kwargs,
    }
    if clock is not None:
        options["clock"] = clock
    return NodePool(fake, **options)


async def _started(pool: NodePool, fake: FakeRay, *ready: str) -> None:
    """Until the listing made the actors; then the named ones say they are ready."""
    with anyio.fail_after(10):
        while len(fake.created) < len(fake.listed):
            pool._update()
            await anyio.sleep(0.001)
    for node_id in ready:
        fake.make_ready(node_id)
    pool._update()


async def test_the_first_run_waits_for_a_ready_node() -> None:
    fake = FakeRay("n1", "n2")
    pool = _pool(fake)
    got: list[Node] = []

    async def acquire() -> None:
        got.append(await pool.acquire())

    async with anyio.create_task_group() as tg:
        tg.start_soon(acquire)
        await _started(pool, fake)
        await anyio.sleep(0.1)
        assert got == []  # both actors still starting
        fake.make_ready("n2")
    assert [n.node_id for n in got] == ["n2"]
    assert got[0].capacity == 8 and got[0].in_flight == 1
    pool.close()


async def test_runs_go_to_the_fewest_in_flight_then_the_least_recently_used() -> None:
    fake = FakeRay("n1", "n2", "n3")
    pool = _pool(fake)
    await _started(pool, fake, "n1", "n2", "n3")
    first = [await pool.acquire() for _ in range(3)]
    assert sorted(n.node_id for n in first) == ["n1", "n2", "n3"]  # one each
    pool.release(first[1])
    again = await pool.acquire()
    assert again is first[1]  # the only one with fewer in flight
    for node in (first[0], first[2], again):
        pool.release(node)
    order = []
    for _ in range(6):  # all idle: each in turn, least recently used first
        node = await pool.acquire()
        order.append(node.node_id)
        pool.release(node)
    assert order[:3] == order[3:] and sorted(order[:3]) == ["n1", "n2", "n3"]
    pool.close()


async def test_capacity_is_runs_per_node_or_the_nodes_own_and_past_it_runs_queue_in_order() -> None:
    fake = FakeRay("n1", "n2")
    pool = _pool(fake, runs_per_node=1)
    await _started(pool, fake, "n1", "n2")
    a, b = await pool.acquire(), await pool.acquire()
    assert {a.node_id, b.node_id} == {"n1", "n2"}
    order: list[str] = []

    async def wait(name: str) -> None:
        node = await pool.acquire()
        order.append(f"{name}@{node.node_id}")

    async with anyio.create_task_group() as tg:
        tg.start_soon(wait, "first")
        await anyio.sleep(0.05)
        tg.start_soon(wait, "second")
        await anyio.sleep(0.05)
        assert order == []
        pool.release(b)
        await anyio.sleep(0.2)
        assert order == [f"first@{b.node_id}"]  # arrival order
        pool.release(a)
    assert order == [f"first@{b.node_id}", f"second@{a.node_id}"]
    pool.close()

    own = FakeRay("n1")
    pool = _pool(own)
    await _started(pool, own)
    own.make_ready("n1", capacity=2)
    pool._update()
    nodes = [await pool.acquire(), await pool.acquire()]
    assert nodes[0].capacity == 2
    with anyio.move_on_after(0.2) as waited:
        await pool.acquire()
    assert waited.cancelled_caught  # full: it waits
    pool.close()


async def test_a_waiting_run_that_is_cancelled_leaves_the_queue() -> None:
    fake = FakeRay("n1")
    pool = _pool(fake, runs_per_node=1)
    await _started(pool, fake, "n1")
    held = await pool.acquire()
    with anyio.move_on_after(0.1):
        await pool.acquire()
    got: list[Node] = []

    async def later() -> None:
        got.append(await pool.acquire())

    async with anyio.create_task_group() as tg:
        tg.start_soon(later)
        await anyio.sleep(0.05)
        pool.release(held)
    assert got == [held]
    pool.close()


async def test_a_node_that_joins_is_used_and_one_that_leaves_is_dropped() -> None:
    fake = FakeRay("n1")
    clock = Clock()
    pool = _pool(fake, clock)
    await _started(pool, fake, "n1")
    fake.listed.append(NodeRecord(node_id="n2", address="", host="", alive=True))
    fake.listed[0] = NodeRecord(node_id="n1", address="", host="", alive=False)
    clock.now += 5.0  # time for a new look
    pool._update()
    await _started(pool, fake, "n2")
    assert fake.killed == ["n1"]
    assert [n.node_id for n in pool.ready_nodes()] == ["n2"]
    node = await pool.acquire()
    assert node.node_id == "n2"
    pool.close()


async def test_a_failed_node_is_tried_again_after_retry_s() -> None:
    fake = FakeRay("n1", "n2")
    clock = Clock()
    pool = _pool(fake, clock, retry_s=30.0)
    await _started(pool, fake, "n1", "n2")
    n1 = pool.nodes["n1"]
    pool.fail(n1, "a run there was lost")
    assert fake.killed == ["n1"] and n1.failure == "a run there was lost"
    assert [n.node_id for n in pool.ready_nodes()] == ["n2"]
    clock.now += 10.0
    pool._update()
    with anyio.fail_after(5):
        while pool._listing is not None:
            await anyio.sleep(0.001)
            pool._update()
    assert fake.created.count("n1") == 1  # too soon
    clock.now += 25.0
    pool._update()
    with anyio.fail_after(5):
        while fake.created.count("n1") < 2:
            await anyio.sleep(0.001)
            pool._update()
    pool.close()


async def test_no_usable_node_is_a_cluster_error_naming_why() -> None:
    fake = FakeRay("n1", "n2")
    pool = _pool(fake)
    await _started(pool, fake)
    fake.ready_futures["n1"].set_exception(ModuleNotFoundError("No module named 'host'"))
    fake.make_ready("n2", protocol=PROTOCOL + 1)
    with pytest.raises(ClusterError) as caught:
        await pool.acquire()
    message = str(caught.value)
    assert "No module named 'host'" in message
    assert "another version of dsh-code" in message
    assert sorted(fake.killed) == ["n1", "n2"]
    pool.close()


async def test_nodes_that_never_get_ready_time_out() -> None:
    fake = FakeRay("n1")
    pool = _pool(fake, start_timeout_s=0.3)
    await _started(pool, fake)
    with anyio.fail_after(5), pytest.raises(ClusterError, match="still starting"):
        await pool.acquire()
    with anyio.fail_after(5), pytest.raises(ClusterError, match=r"within 0\.3 s"):
        await pool.start()
    pool.close()


async def test_start_waits_for_every_listed_node() -> None:
    fake = FakeRay("n1", "n2")
    pool = _pool(fake)
    done = anyio.Event()

    async def start() -> None:
        await pool.start()
        done.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(start)
        await _started(pool, fake, "n1")
        await anyio.sleep(0.1)
        assert not done.is_set()
        fake.make_ready("n2")
    assert sorted(n.node_id for n in pool.ready_nodes()) == ["n1", "n2"]
    pool.close()


async def test_excluded_nodes_are_not_picked() -> None:
    fake = FakeRay("n1", "n2")
    pool = _pool(fake)
    await _started(pool, fake, "n1", "n2")
    for _ in range(3):
        node = await pool.acquire(exclude=("n1",))
        assert node.node_id == "n2"
        pool.release(node)
    pool.close()


async def test_closing_ends_the_wait_of_queued_runs() -> None:
    fake = FakeRay("n1")
    pool = _pool(fake, runs_per_node=1)
    await _started(pool, fake, "n1")
    await pool.acquire()
    errors: list[BaseException] = []

    async def queued() -> None:
        try:
            await pool.acquire()
        except RuntimeClosedError as exc:
            errors.append(exc)

    async with anyio.create_task_group() as tg:
        tg.start_soon(queued)
        await anyio.sleep(0.05)
        nodes, _ = pool.close()
        assert nodes[0].node_id == "n1"
    assert len(errors) == 1 and "closed while the run was waiting" in str(errors[0])
    pool._update()  # a closed pool makes no actor any more
    assert fake.created == ["n1"]
