"""RayRuntime against a real local Ray cluster: placement, bindings, logs, abort, dead nodes."""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from typing import Any

import anyio
import pytest

from host.cluster import ClusterRunStats, RayRuntime
from host.sandbox import SubprocessRuntime
from runtime import Limits, RunRequest, RunResult, RunStats, RuntimeClosedError
from tests.host.cluster.local_cluster import LocalCluster

pytestmark = [pytest.mark.anyio, pytest.mark.cluster]

#: A run that would go on for ever: it prints once, then sleeps in short steps.
_FOREVER = "import time\nprint('started', flush=True)\nwhile True:\n    time.sleep(0.01)\n"


@pytest.fixture
def anyio_backend() -> str:
    """asyncio here (the cluster tests are not light); the trio test says so itself."""
    return "asyncio"


@pytest.fixture
async def rt(cluster: LocalCluster) -> AsyncIterator[RayRuntime]:
    """A started RayRuntime on the cluster; after it closes, no child of it is left."""
    async with RayRuntime(cluster.address) as runtime:
        yield runtime
    await _no_children_left(cluster)


async def _no_children_left(cluster: LocalCluster) -> None:
    with anyio.move_on_after(20):
        while cluster.our_children():
            await anyio.sleep(0.05)
    assert cluster.our_children() == []


def _stats(result: RunResult) -> ClusterRunStats:
    assert isinstance(result.stats, ClusterRunStats), result
    return result.stats


async def _whoami(args: Any) -> Any:
    return {"pid": os.getpid(), "args": args}


async def test_runs_spread_over_both_nodes_and_bindings_are_answered_here(
    rt: RayRuntime, cluster: LocalCluster
) -> None:
    nodes = {n.node_id for n in cluster.nodes}
    assert set(rt.nodes) == nodes
    seen = set()
    for i in range(4):
        program = f"import os\nanswer = await tools.whoami(i={i})\nreturn [os.getpid(), answer]"
        result = await rt.run(RunRequest(program=program, bindings={"tools.whoami": _whoami}))
        assert result.ok, result
        child_pid, answer = result.value
        assert answer == {"pid": os.getpid(), "args": {"i": i}}  # the binding ran here
        assert child_pid != os.getpid()
        stats = _stats(result)
        assert stats.node in nodes
        assert stats.calls == 1
        assert stats.retried_from is None
        assert stats.isolation == rt.isolation
        seen.add(stats.node)
    assert seen == nodes


async def test_concurrent_runs_all_run_at_once(rt: RayRuntime, cluster: LocalCluster) -> None:
    count = 6
    arrived = 0
    everyone = anyio.Event()

    async def gate(args: Any) -> int:
        nonlocal arrived
        arrived += 1
        if arrived == count:
            everyone.set()
        with anyio.fail_after(30):
            await everyone.wait()  # returns only once every run is in its call at once
        return int(args["i"])

    results: list[RunResult] = []

    async def one(i: int) -> None:
        program = f"return await gate(i={i}) * 2"
        results.append(await rt.run(RunRequest(program=program, bindings={"gate": gate})))

    async with anyio.create_task_group() as tg:
        for i in range(count):
            tg.start_soon(one, i)
    assert all(r.ok for r in results), results
    assert sorted(r.value for r in results) == [2 * i for i in range(count)]
    assert {_stats(r).node for r in results} == {n.node_id for n in cluster.nodes}


async def test_runs_past_capacity_wait_here_and_a_waiting_run_can_be_cancelled(
    cluster: LocalCluster,
) -> None:
    in_flight = 0
    most = 0
    release = anyio.Event()

    async def hold(args: Any) -> None:
        nonlocal in_flight, most
        in_flight += 1
        most = max(most, in_flight)
        try:
            await release.wait()
        finally:
            in_flight -= 1

    async with RayRuntime(cluster.address, runs_per_node=1) as rt:
        results: list[RunResult] = []

        async def one() -> None:
            results.append(
                await rt.run(RunRequest(program="await hold()", bindings={"hold": hold}))
            )

        async with anyio.create_task_group() as tg:
            for _ in range(3):
                tg.start_soon(one)
            with anyio.fail_after(30):
                while in_flight < 2:
                    await anyio.sleep(0.01)
            # two nodes, one run each: a fourth run waits, and leaves at once when cancelled
            with anyio.move_on_after(0.3) as waited:
                await rt.run(RunRequest(program="return 1"))
            assert waited.cancelled_caught
            assert in_flight == 2
            release.set()
        assert most == 2
        assert [r.ok for r in results] == [True, True, True]
    await _no_children_left(cluster)


async def test_logs_stream_to_the_caller_as_they_are_written(rt: RayRuntime) -> None:
    lines: list[str] = []

    async def seen(args: Any) -> list[str]:
        return list(lines)  # what had arrived here when the program asked

    program = "print('one')\nimport sys\nsys.stderr.write('two\\n')\nsys.stderr.flush()\n"
    program += "import time\nfor _ in range(3000):\n    got = await seen()\n"
    program += (
        "    if 'two' in got:\n        break\n    time.sleep(0.01)\nprint('three')\nreturn got"
    )
    result = await rt.run(RunRequest(program=program, bindings={"seen": seen}, on_log=lines.append))
    assert result.ok, result
    assert result.value == ["one", "two"]
    assert result.logs == ["one", "two", "three"] == lines


async def test_on_progress_reports_the_node(rt: RayRuntime) -> None:
    reports: list[RunStats] = []
    program = "import time\nend = time.monotonic() + 0.5\nwhile time.monotonic() < end:\n    pass"
    result = await rt.run(RunRequest(program=program, on_progress=reports.append))
    assert result.ok, result
    assert reports, "no progress report in half a second of busy CPU"
    assert {r.node for r in reports} == {_stats(result).node}
    assert all(isinstance(r, ClusterRunStats) for r in reports)


async def test_abort_reaches_the_remote_child(rt: RayRuntime) -> None:
    abort = anyio.Event()

    def on_log(line: str) -> None:
        if line == "started":
            abort.set()

    started = time.monotonic()
    result = await rt.run(RunRequest(program=_FOREVER, abort=abort, on_log=on_log))
    assert result.error is not None and result.error.kind == "aborted", result
    assert result.error.message == "the run was aborted by the caller"
    assert result.logs == ["started"]
    assert time.monotonic() - started < 30


async def test_the_callers_cancellation_aborts_the_run(rt: RayRuntime) -> None:
    result: RunResult | None = None
    with anyio.move_on_after(1.0):
        result = await rt.run(RunRequest(program=_FOREVER))
    assert result is not None
    assert result.error is not None and result.error.kind == "aborted", result
    assert result.error.message == "the caller cancelled the run"
    ok = await rt.run(RunRequest(program="return 1"))
    assert ok.value == 1


_KINDS = {
    "exception": ("raise ValueError('no')", Limits()),
    "parse": ("return (", Limits()),
    "invalid_completion": ("return {1, 2}", Limits()),
    "output_limit": ("print('x' * 5000)", Limits(max_output_bytes=1000)),
    "budget": ("while True:\n    pass", Limits(compute_ms=200)),
    "memory": ("x = bytearray(256 * 1024 * 1024)", Limits(max_heap_mb=64)),
    "died": ("import os\nos._exit(3)", Limits()),
}


async def test_every_failure_kind_keeps_its_meaning(rt: RayRuntime) -> None:
    async with SubprocessRuntime() as local:
        for kind, (program, limits) in _KINDS.items():
            request = RunRequest(program=program, limits=limits)
            here, there = await local.run(request), await rt.run(request)
            assert here.error is not None and there.error is not None, kind
            assert there.error.kind == here.error.kind == kind
            assert there.error.exit_status == here.error.exit_status
            assert there.error.budget == here.error.budget
            assert there.error.exception_type == here.error.exception_type
            assert there.logs == here.logs
            # where a budget stopped the program is a line of the loop either run may be at
            assert _without_where(there.error.message) == _without_where(here.error.message)


def _without_where(message: str) -> str:
    return message.partition("; it was stopped here")[0]


async def test_binding_failures_and_bad_values_as_locally(rt: RayRuntime) -> None:
    async def refuse(args: Any) -> Any:
        raise ValueError("not today")

    async def tuple_value(args: Any) -> Any:
        return (1, 2)

    program = "try:\n    await refuse()\nexcept ToolCallError as exc:\n"
    program += "    return [exc.tool, exc.message, exc.code]"
    result = await rt.run(RunRequest(program=program, bindings={"refuse": refuse}))
    assert result.value == ["refuse", "not today", "TOOL_ERROR"], result
    bad = await rt.run(RunRequest(program="await t()\nreturn 1", bindings={"t": tuple_value}))
    assert bad.error is not None and bad.error.kind == "invalid_completion", bad
    assert bad.error.message == "binding t returned a value that is not lossless JSON: tuple at $"


async def test_inputs_limits_and_the_policy_travel(rt: RayRuntime) -> None:
    request = RunRequest(
        program="return [n * 2, big + 1]",
        inputs={"n": 21, "big": 10**40},
        policy="restricted",
        limits=Limits(max_parallel_sub_calls=1),
    )
    result = await rt.run(request)
    assert result.value == [42, 10**40 + 1], result
    rejected = await rt.run(RunRequest(program="import os", policy="restricted"))
    assert rejected.error is not None and rejected.error.kind == "parse"


@pytest.mark.parametrize("anyio_backend", ["trio"])
async def test_under_trio(cluster: LocalCluster) -> None:
    lines: list[str] = []
    async with RayRuntime(cluster.address) as rt:
        program = "print('hi')\nreturn await tools.whoami(x=1)"
        result = await rt.run(
            RunRequest(program=program, bindings={"tools.whoami": _whoami}, on_log=lines.append)
        )
        assert result.value == {"pid": os.getpid(), "args": {"x": 1}}, result
        assert lines == ["hi"]
        abort = anyio.Event()
        async with anyio.create_task_group() as tg:
            tg.start_soon(_set_after, abort, 0.5)
            aborted = await rt.run(RunRequest(program=_FOREVER, abort=abort))
        assert aborted.error is not None and aborted.error.kind == "aborted"
    await _no_children_left(cluster)


async def _set_after(event: anyio.Event, delay: float) -> None:
    await anyio.sleep(delay)
    event.set()


async def test_close_aborts_runs_in_flight_and_leaves_no_child(cluster: LocalCluster) -> None:
    rt = RayRuntime(cluster.address)
    results: list[RunResult] = []
    lines: list[str] = []

    async def one() -> None:
        results.append(await rt.run(RunRequest(program=_FOREVER, on_log=lines.append)))

    async with anyio.create_task_group() as tg:
        for _ in range(2):
            tg.start_soon(one)
        with anyio.fail_after(60):
            while len(lines) < 2:  # both runs are running
                await anyio.sleep(0.05)
        await rt.aclose()
    assert [r.error.kind if r.error else None for r in results] == ["aborted", "aborted"]
    assert all(
        r.error and r.error.message == "the runtime was closed while the run was in flight"
        for r in results
    )
    await _no_children_left(cluster)
    with pytest.raises(RuntimeClosedError):
        await rt.run(RunRequest(program="return 1"))


async def test_a_node_that_joins_is_used_and_one_killed_mid_run_gives_died_naming_it(
    cluster: LocalCluster,
) -> None:
    async with RayRuntime(cluster.address, runs_per_node=1, refresh_s=0.5) as rt:
        assert len(rt.nodes) == 2
        victim = await anyio.to_thread.run_sync(cluster.add_node)
        with anyio.fail_after(60):  # the next look at the node list finds it
            while victim.node_id not in rt.nodes:
                await rt.run(RunRequest(program="return 1"))
                await anyio.sleep(0.1)
        where: dict[int, str] = {}
        results: dict[int, RunResult] = {}

        async def one(i: int) -> None:
            def on_progress(stats: RunStats) -> None:
                where[i] = stats.node or ""

            request = RunRequest(program=_FOREVER, on_progress=on_progress)
            results[i] = await rt.run(request)

        async with anyio.create_task_group() as tg:
            for i in range(3):  # one per node: each has room for one
                tg.start_soon(one, i)
            with anyio.fail_after(60):
                while len(set(where.values())) < 3:
                    await anyio.sleep(0.05)
            on_victim = next(i for i, node in where.items() if node == victim.node_id)
            killed = time.monotonic()
            cluster.kill_node(victim)
            with anyio.fail_after(60):  # never a hang
                while on_victim not in results:
                    await anyio.sleep(0.05)
            took = time.monotonic() - killed
            tg.cancel_scope.cancel()  # the other two: cancelled by us, as they never end
        died = results[on_victim]
        assert died.error is not None and died.error.kind == "died", died
        assert victim.node_id[:12] in died.error.message
        assert died.logs == ["started"]
        assert _stats(died).node == victim.node_id
        assert victim.node_id not in rt.nodes
        others = [r for i, r in results.items() if i != on_victim]
        assert all(r.error and r.error.kind == "aborted" for r in others), others
        after = await rt.run(RunRequest(program="return 1"))
        assert after.value == 1 and _stats(after).node != victim.node_id
    cluster.wait_node_gone(victim)
    await _no_children_left(cluster)
    print(f"the run on the killed node settled {took:.1f} s after the kill")


async def test_a_run_whose_node_died_before_it_started_is_retried_once(
    cluster: LocalCluster,
) -> None:
    victim = cluster.add_node()
    # no new look at the node list: the pool still takes the dead node for a live one
    async with RayRuntime(cluster.address, refresh_s=3600) as rt:
        assert victim.node_id in rt.nodes
        cluster.kill_node(victim)
        cluster.wait_node_gone(victim)  # its actor too: Ray may list the node as alive a while
        retried = []
        for i in range(len(rt.nodes)):  # the least recently used node goes next: each in turn
            result = await rt.run(RunRequest(program=f"return {i}"))
            assert result.value == i, result
            if _stats(result).retried_from is not None:
                retried.append(result)
        assert len(retried) == 1
        stats = _stats(retried[0])
        assert stats.retried_from == victim.node_id
        assert stats.node != victim.node_id
        assert victim.node_id not in rt.nodes


def test_a_runtime_that_connects_itself_disconnects_at_close(cluster: LocalCluster) -> None:
    script = (
        "import anyio, json, ray, sys\n"
        "from host.cluster import RayRuntime\n"
        "from runtime import RunRequest\n"
        "async def main():\n"
        "    async with RayRuntime(sys.argv[1]) as rt:\n"
        "        result = await rt.run(RunRequest(program='return 6 * 7'))\n"
        "        connected = ray.is_initialized()\n"
        "    print(json.dumps([result.value, connected, ray.is_initialized()]))\n"
        "anyio.run(main)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", script, cluster.address],
        capture_output=True,
        text=True,
        timeout=120,
        env=cluster.env,
        check=False,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    assert json.loads(out.stdout.strip().splitlines()[-1]) == [42, True, False]


async def test_the_clusters_error_messages_go_to_the_log_not_stdout(
    cluster: LocalCluster, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    ray: Any = importlib.import_module("ray")
    worker = ray._private.worker.global_worker
    ray._private.utils.publish_error_to_driver(
        "dsh_code_test", "a node says hello\nand more", worker.gcs_client, worker.current_job_id
    )
    with anyio.fail_after(30):
        while "a node says hello" not in caplog.text:
            await anyio.sleep(0.05)
    assert "and more" not in caplog.text  # the first line only, at WARNING
    out = capsys.readouterr()
    assert out.out == ""  # Ray would print it to stdout: the MCP channel of `dsh-code mcp`


async def test_a_held_call_pauses_the_run_and_a_resume_replays_it_on_a_node(
    rt: RayRuntime,
) -> None:
    from runtime import Journal
    from tests.durable import CHARGE_THEN_RECEIPT, SEEDED, Shop

    shop = Shop()
    request = RunRequest(program=CHARGE_THEN_RECEIPT, bindings=shop.bindings)
    paused = await rt.run(request)
    assert paused.paused and paused.logs == ["charging", "charged ch_1"], paused.error
    assert paused.journal is not None
    journal = Journal.loads(paused.journal.dumps())
    (held,) = paused.pending
    done = await rt.run(request, resume=journal, decisions={held.call_id: "allow"})
    assert done.ok and done.value == {
        "charge": {"id": "ch_1", "amount": 5},
        "receipt": "sent to a@example.com",
    }, done.error
    assert done.logs == ["receipt: sent to a@example.com"]
    assert shop.executed == {"charge": 1, "send_receipt": 1}
    assert shop.call_ids == [f"{journal.run_id}:1", f"{journal.run_id}:2"]
    # random and set order replay on whichever node takes the resume (each has its own seed)
    for _ in range(2):
        seeded = RunRequest(program=SEEDED, bindings=shop.bindings)
        first = await rt.run(seeded)
        again = await rt.run(
            seeded,
            resume=first.journal,
            decisions={call.call_id: "allow" for call in first.pending},
        )
        assert again.ok, again.error


_TRACED = """
import anyio, sys
from host.cluster import RayRuntime
from host.telemetry import setup_otlp
from runtime import RunRequest

shutdown = setup_otlp()

async def whoami(args):
    return 7

async def main():
    # the nodes' actors export too when their environment says where
    node_env = {"OTEL_EXPORTER_OTLP_ENDPOINT": sys.argv[2], "OTEL_SERVICE_NAME": "node"}
    options = {"runtime_env": {"env_vars": node_env}}
    async with RayRuntime(sys.argv[1], init_options=options) as rt:
        program = "return await tools.whoami()"
        result = await rt.run(RunRequest(program=program, bindings={"tools.whoami": whoami}))
    assert result.value == 7, result
anyio.run(main)
shutdown()
"""


def test_the_nodes_spans_join_the_callers_trace(cluster: LocalCluster) -> None:
    from tests.host.telemetry.support import OtlpReceiver

    receiver = OtlpReceiver()
    with receiver as received:
        env = dict(
            cluster.env, OTEL_EXPORTER_OTLP_ENDPOINT=receiver.endpoint, OTEL_SERVICE_NAME="caller"
        )
        out = subprocess.run(
            [sys.executable, "-c", _TRACED, cluster.address, receiver.endpoint],
            capture_output=True,
            text=True,
            timeout=180,
            env=env,
            check=False,
        )
        assert out.returncode == 0, out.stderr[-3000:]
    spans = received.spans()
    runs = {s["service"]: s for s in spans if s["name"] == "dsh_code.run"}
    assert set(runs) == {"caller", "node"}
    caller, node = runs["caller"], runs["node"]
    assert node["trace_id"] == caller["trace_id"]
    assert node["parent_id"] == caller["span_id"]
    assert caller["attributes"]["dsh_code.run.node"]  # the node's id, said by the caller
    assert node["attributes"]["dsh_code.run.id"] == caller["attributes"]["dsh_code.run.id"]
    calls = [s for s in spans if s["name"] == "execute_tool tools.whoami"]
    assert [(c["service"], c["parent_id"]) for c in calls] == [("caller", caller["span_id"])]
