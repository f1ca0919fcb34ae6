"""A real local Ray cluster for the tests: a head and extra nodes made with ``ray start``.

Each node is one ``ray start --block`` process, the parent of every process of its node;
the cluster owns those processes by pid and, at ``stop()``, ends them and checks that
every process it ever saw below them is gone. Token authentication is on (a fresh token
per cluster, passed to every node and to this process through the environment).
"""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

__all__ = ("LocalCluster", "RayNode")

#: Seconds a node may take to say it started (the machine may be busy).
_START_S = 90.0
#: Seconds ``stop()`` gives a node to end its processes after SIGTERM.
_STOP_S = 30.0
_ROOT = str(Path(__file__).resolve().parents[3])


class RayNode:
    """One node: its ``ray start --block`` process and, once started, its raylet's node id."""

    def __init__(self, proc: subprocess.Popen[bytes], log: Path) -> None:
        self.proc = proc
        self.log = log
        self.node_id = ""
        self.seen: dict[int, float] = {}  # pid -> create_time of every process seen below it

    def processes(self) -> list[psutil.Process]:
        """The node's processes now: ``ray start`` and everything below it."""
        try:
            top = psutil.Process(self.proc.pid)
            return [top, *top.children(recursive=True)]
        except psutil.NoSuchProcess:
            return []

    def raylet(self) -> psutil.Process:
        for proc in self.processes():
            try:
                if proc.name() == "raylet":
                    return proc
            except psutil.NoSuchProcess:
                continue
        raise AssertionError(f"node {self.node_id or self.proc.pid} has no raylet")


class LocalCluster:
    """A Ray cluster on this machine, started and stopped by the tests."""

    def __init__(self) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="dshray", dir="/tmp"))  # short: socket paths
        self.temp_dir = self.root / "ray"
        self.ray = str(Path(sys.executable).with_name("ray"))
        self.env = {
            **os.environ,
            "RAY_AUTH_MODE": "token",
            "RAY_AUTH_TOKEN": secrets.token_hex(32),
            "RAY_USAGE_STATS_ENABLED": "0",
        }
        self.nodes: list[RayNode] = []
        self.address = ""
        self._seen: dict[int, float] = {}  # pid -> create_time of every process seen

    # ---- starting ----------------------------------------------------------------------

    def _spawn(self, args: list[str], name: str) -> RayNode:
        log = self.root / f"{name}.log"
        with open(log, "wb") as out:
            proc = subprocess.Popen(
                [self.ray, "start", *args, "--block", "--disable-usage-stats"],
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=self.env,
                start_new_session=True,
            )
        node = RayNode(proc, log)
        self.nodes.append(node)
        self._wait_started(node)
        return node

    def _wait_started(self, node: RayNode) -> None:
        deadline = time.monotonic() + _START_S
        while time.monotonic() < deadline:
            if node.proc.poll() is not None:
                raise RuntimeError(
                    f"ray start exited ({node.proc.returncode}):\n{self._tail(node)}"
                )
            if b"Ray runtime started" in node.log.read_bytes():
                for proc in node.processes():
                    try:
                        flags = [a for a in proc.cmdline() if a.startswith("--node_id=")]
                    except psutil.NoSuchProcess:
                        continue
                    if proc.name() == "raylet" and flags:
                        node.node_id = flags[0].split("=", 1)[1]
                        self.remember()
                        return
            time.sleep(0.1)
        raise RuntimeError(f"ray start did not start within {_START_S} s:\n{self._tail(node)}")

    def _tail(self, node: RayNode) -> str:
        return node.log.read_text(errors="replace")[-3000:]

    def start_head(self) -> RayNode:
        """The head node (no dashboard, no CPUs for Ray's own tasks: our actors need none)."""
        head = self._spawn(
            [
                "--head",
                "--port=0",
                "--node-ip-address=127.0.0.1",
                "--include-dashboard=false",
                "--num-cpus=0",
                "--object-store-memory=200000000",
                f"--temp-dir={self.temp_dir}",
            ],
            "head",
        )
        self.address = (self.temp_dir / "ray_current_cluster").read_text().strip()
        return head

    def add_node(self) -> RayNode:
        """One more node joining the head."""
        return self._spawn(
            [
                f"--address={self.address}",
                "--node-ip-address=127.0.0.1",
                "--num-cpus=0",
                "--object-store-memory=200000000",
            ],
            f"node{len(self.nodes)}",
        )

    # ---- watching ----------------------------------------------------------------------

    def remember(self) -> None:
        """Note every process of every node now, to check at ``stop()`` that all are gone."""
        for node in self.nodes:
            for proc in node.processes():
                try:
                    node.seen[proc.pid] = self._seen[proc.pid] = proc.create_time()
                except psutil.NoSuchProcess:
                    continue

    def our_children(self) -> list[psutil.Process]:
        """Templates and children of dsh-code (this checkout) anywhere below the nodes."""
        found = []
        for node in self.nodes:
            for proc in node.processes():
                try:
                    if _is_ours(proc):
                        found.append(proc)
                except psutil.NoSuchProcess:
                    continue
        return found

    def kill_node(self, node: RayNode) -> None:
        """SIGKILL the node's raylet: the node dies as a crashed machine's would (its
        ``ray start --block`` then ends the node's other processes)."""
        self.remember()
        node.raylet().kill()

    def wait_node_gone(self, node: RayNode, timeout: float = 60.0) -> None:
        """Until the node's ``ray start`` and every process seen below it have exited
        (workers outlive a killed raylet for a while, no longer below it)."""
        deadline = time.monotonic() + timeout
        left = _alive(node.seen, deadline)
        if node.proc.poll() is None or left:
            raise AssertionError(f"node {node.node_id[:12]} still has processes: {left}")

    # ---- stopping ----------------------------------------------------------------------

    def stop(self) -> list[str]:
        """End every node and return what is left of the processes seen (should be [])."""
        self.remember()
        for node in reversed(self.nodes):
            if node.proc.poll() is None:
                node.proc.send_signal(signal.SIGTERM)  # ray start ends its node's processes
        deadline = time.monotonic() + _STOP_S
        for node in self.nodes:
            try:
                node.proc.wait(timeout=max(deadline - time.monotonic(), 0.1))
            except subprocess.TimeoutExpired:
                node.proc.kill()
                node.proc.wait()
        left = _alive(self._seen, deadline)
        for proc in left:
            try:
                proc.kill()
            except psutil.NoSuchProcess:
                continue
        shutil.rmtree(self.root, ignore_errors=True)
        return [f"{p.pid} {_describe(p)}" for p in left]


def _alive(seen: dict[int, float], deadline: float) -> list[psutil.Process]:
    """The processes of ``seen`` that still run (waiting for them until ``deadline``)."""
    while True:
        left = []
        for pid, created in seen.items():
            try:
                proc = psutil.Process(pid)
                if proc.create_time() == created and proc.status() != psutil.STATUS_ZOMBIE:
                    left.append(proc)
            except psutil.NoSuchProcess:
                continue
        if not left or time.monotonic() >= deadline:
            return left
        time.sleep(0.1)


def _is_ours(proc: psutil.Process) -> bool:
    cmdline = proc.cmdline()
    return any("runtime._template" in a for a in cmdline) and _ROOT in cmdline


def _describe(proc: psutil.Process) -> str:
    try:
        return " ".join(proc.cmdline())[:200] or proc.name()
    except psutil.Error:
        return "?"


def orphans() -> list[psutil.Process]:
    """Templates or children of this checkout's dsh-code that no process of ours owns."""
    mine = {os.getpid(), *(p.pid for p in psutil.Process().children(recursive=True))}
    found = []
    for proc in psutil.process_iter():
        try:
            if proc.pid not in mine and _is_ours(proc):
                found.append(proc)
        except psutil.Error:
            continue
    return found
