"""The local Ray cluster of the cluster tests: a head and one more node, module-scoped."""

from __future__ import annotations

import builtins
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from tests.host.cluster.local_cluster import LocalCluster, orphans


def _connect(address: str) -> Any:
    """This process's Ray connection, as a ``RayBackend`` (``ray.init`` off the main
    thread: it would take over SIGTERM there)."""
    from host.cluster._ray import RayBackend

    backend = RayBackend()
    errors: list[BaseException] = []

    def connect() -> None:
        try:
            backend.connect(address, {})
        except BaseException as exc:
            errors.append(exc)

    thread = threading.Thread(target=connect)
    thread.start()
    thread.join(120)
    if errors:
        raise errors[0]
    return backend


def _refresh_auth(ray: Any) -> None:
    """Make an already imported Ray read the authentication settings again (as
    ``ray._private.authentication`` does when it turns token mode on)."""
    raylet = ray._raylet
    raylet.Config.initialize("")
    raylet.AuthenticationTokenLoader.instance().reset_cache()


def wait_for_nodes(ray: Any, node_ids: set[str], timeout: float = 60.0) -> None:
    """Until Ray lists every node of ``node_ids`` as alive."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        alive = {n["NodeID"] for n in ray.nodes() if n["Alive"]}
        if node_ids <= alive:
            return
        time.sleep(0.1)
    raise AssertionError(f"Ray does not list {node_ids} as alive")


@pytest.fixture(scope="module")
def cluster() -> Iterator[LocalCluster]:
    """The cluster, this process connected to it; stopped, with every Ray process gone, when
    the module that uses it ends (not at the end of the session: it is not light)."""
    local = LocalCluster()
    print_before = builtins.print
    try:
        with pytest.MonkeyPatch.context() as env:
            # this process joins with the cluster's token, like every node; Ray reads the
            # mode when it is imported
            env.setenv("RAY_AUTH_MODE", "token")
            env.setenv("RAY_AUTH_TOKEN", local.env["RAY_AUTH_TOKEN"])
            env.setenv("RAY_USAGE_STATS_ENABLED", "0")
            _refresh_auth(
                pytest.importorskip(
                    "ray", reason="Ray is not installed: pip install 'dsh-code[ray]'"
                )
            )
            local.start_head()
            local.add_node()
            backend = _connect(local.address)
            try:
                wait_for_nodes(backend.ray, {n.node_id for n in local.nodes})
                yield local
            finally:
                backend.shutdown()
    finally:
        left = local.stop()
    assert left == [], f"Ray processes left after the cluster stopped: {left}"
    replaced, builtins.print = builtins.print is not print_before, print_before
    assert not replaced, "Ray replaced builtins.print in this process"
    assert orphans() == [], "dsh-code children outlived the cluster"
