"""Model tool-call batches: classification, the rolling pool, barriers, and model order."""

from __future__ import annotations

import time
from typing import Any

import anyio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from host.tools import (
    ErrorCode,
    PostDecision,
    ToolCall,
    ToolCallRequest,
    ToolRegistry,
    ToolResult,
    ToolResultEvent,
    ToolRunContext,
    ToolsConfig,
    define_tool,
    is_concurrency_safe,
    run_tool_calls,
    schema,
)

QUIET = ToolsConfig(timeout_policy=False, repeat_reminder=None)


class Probe:
    """Records body starts/ends and the peak number of overlapping bodies."""

    def __init__(self) -> None:
        self.active = 0
        self.peak = 0
        self.log: list[str] = []

    def tool(self, name: str, safe: Any) -> Any:
        async def run(args: Any, ctx: ToolRunContext) -> Any:
            self.active += 1
            self.peak = max(self.peak, self.active)
            self.log.append(f"start {args['id']}")
            await anyio.sleep(args.get("delay", 0.0))
            self.log.append(f"end {args['id']}")
            self.active -= 1
            return args["id"]

        return define_tool(
            name=name,
            description="",
            parameters={"id": schema.string(required=True), "delay": schema.number()},
            execute=run,
            concurrency_safe=safe,
        )


def setup(max_parallel: int = 10) -> tuple[ToolRegistry, Probe]:
    registry = ToolRegistry(
        ToolsConfig(
            timeout_policy=False, repeat_reminder=None, max_parallel_tool_calls=max_parallel
        )
    )
    probe = Probe()
    registry.register(probe.tool("par", True))
    registry.register(probe.tool("ex", False))
    return registry, probe


def req(name: str, ident: str, delay: float = 0.0) -> ToolCallRequest:
    return ToolCallRequest(name, {"id": ident, "delay": delay}, call_id=ident)


@pytest.mark.parametrize(
    ("verdict", "expected"),
    [
        (True, True),
        (False, False),
        (1, False),
        ("yes", False),
        (lambda args: args["id"] == "ro", True),
        (lambda args: 1, False),
        (lambda args: None, False),
    ],
)
def test_only_exactly_true_is_parallel(verdict: Any, expected: bool) -> None:
    registry = ToolRegistry(QUIET)
    registry.register(Probe().tool("t", verdict))
    assert is_concurrency_safe(registry, req("t", "ro"), registry.root) is expected


def test_raising_invalid_unknown_and_hidden_calls_are_exclusive() -> None:
    registry = ToolRegistry(QUIET)

    def boom(args: Any) -> bool:
        raise RuntimeError("classifier bug")

    async def later(args: Any) -> bool:
        return True

    registry.register(Probe().tool("raises", boom))
    registry.register(Probe().tool("coro", later))
    registry.register(Probe().tool("checks", lambda args: True))
    agent = registry.agent_scope()
    agent.restrict(deny=["checks"])
    root = registry.root
    assert not is_concurrency_safe(registry, req("raises", "a"), root)
    assert not is_concurrency_safe(registry, req("coro", "a"), root)
    assert not is_concurrency_safe(registry, ToolCallRequest("checks", {"id": 3}), root)
    assert is_concurrency_safe(registry, req("checks", "a"), root)
    assert not is_concurrency_safe(registry, req("checks", "a"), agent)
    assert not is_concurrency_safe(registry, req("nope", "a"), root)


def test_a_raising_or_async_classifier_is_logged(caplog: pytest.LogCaptureFixture) -> None:
    registry = ToolRegistry(QUIET)

    def boom(args: Any) -> bool:
        raise RuntimeError("classifier bug")

    async def later(args: Any) -> bool:
        return True

    registry.register(Probe().tool("raises", boom))
    registry.register(Probe().tool("coro", later))
    registry.register(Probe().tool("fine", lambda args: False))
    for name in ("raises", "coro", "fine"):
        assert not is_concurrency_safe(registry, req(name, "a"), registry.root)
    records = [r for r in caplog.records if r.name == "host.tools"]
    assert [(r.levelname, r.getMessage()) for r in records] == [
        ("ERROR", "concurrency_safe of 'raises' failed"),
        ("WARNING", "concurrency_safe of 'coro' must be synchronous"),
    ]
    assert records[0].exc_info is not None


@pytest.mark.anyio
async def test_parallel_calls_overlap_and_results_keep_model_order() -> None:
    registry, probe = setup()
    calls = [req("par", str(i), delay=0.2 - i * 0.01) for i in range(10)]  # 1.55 s in a row
    started = time.monotonic()
    results = await registry.invoke_batch(calls)
    elapsed = time.monotonic() - started
    assert [r.value for r in results] == [str(i) for i in range(10)]
    assert probe.peak == 10
    assert elapsed < 1.0


@pytest.mark.anyio
async def test_the_pool_is_bounded_and_rolling() -> None:
    registry, probe = setup(max_parallel=3)
    calls = [req("par", str(i), delay=0.02 if i else 0.2) for i in range(7)]
    results = await run_tool_calls(registry, calls)
    assert [r.value for r in results] == [str(i) for i in range(7)]
    assert probe.peak == 3
    # rolling: while call 0 is still running, the other slots keep turning over
    assert probe.log.index("end 0") > probe.log.index("start 6")


@pytest.mark.anyio
async def test_exclusive_calls_are_barriers() -> None:
    registry, probe = setup()
    calls = [
        req("par", "p1", 0.05),
        req("par", "p2", 0.01),
        req("ex", "x", 0.01),
        req("par", "p3", 0.05),
        req("par", "p4", 0.0),
    ]
    results = await registry.invoke_batch(calls)
    assert [r.value for r in results] == ["p1", "p2", "x", "p3", "p4"]
    log = probe.log
    assert log.index("start x") > max(log.index("end p1"), log.index("end p2"))
    assert log.index("start p3") > log.index("end x")
    assert log.index("start p4") < log.index("end p3")


@pytest.mark.anyio
async def test_policy_results_and_contexts_keep_model_order() -> None:
    registry, _probe = setup()
    pre: list[str] = []
    post: list[str] = []
    published: list[str] = []

    async def slow_pre(call: ToolCall, decision: Any) -> None:
        pre.append(call.args["id"])
        await anyio.sleep(0.001)

    def tag(call: ToolCall, result: ToolResult) -> PostDecision:
        post.append(call.args["id"])
        return PostDecision(additional_contexts=(f"ctx {call.args['id']}",))

    def on_result(event: ToolResultEvent) -> None:
        published.append(event.call.args["id"])

    registry.pre_execute(slow_pre)
    registry.post_execute(tag)
    registry.on("result", on_result)
    order = [str(i) for i in range(6)]
    calls = [req("par", ident, delay=0.06 - 0.01 * int(ident)) for ident in order]
    results = await registry.invoke_batch(calls)
    assert pre == order
    assert post == order
    assert published == order
    texts = [r.additional_contexts[0]["content"][0]["text"] for r in results]
    assert texts == [f"ctx {ident}" for ident in order]


@pytest.mark.anyio
async def test_rejected_calls_in_a_parallel_run_keep_their_place() -> None:
    registry, probe = setup()
    registry.guard(lambda call: "blocked" if call.args["id"] == "b" else None)
    calls = [req("par", "a", 0.01), req("par", "b"), req("par", "c")]
    results = await registry.invoke_batch(calls)
    assert [r.code for r in results] == [None, ErrorCode.GUARD_REJECTED, None]
    assert "start b" not in probe.log


@pytest.mark.anyio
async def test_batch_rejects_a_zero_pool() -> None:
    registry, _ = setup()
    with pytest.raises(ValueError, match="max_parallel"):
        await registry.invoke_batch([req("par", "a")], max_parallel=-1)


@settings(max_examples=25, deadline=None)
@given(
    st.lists(
        st.tuples(st.booleans(), st.sampled_from([0.0, 0.001, 0.003])), min_size=1, max_size=8
    ),
    st.integers(min_value=1, max_value=4),
)
@pytest.mark.anyio
async def test_any_batch_keeps_order_barriers_and_the_pool_bound(
    plan: list[tuple[bool, float]], limit: int
) -> None:
    registry, probe = setup(max_parallel=limit)
    calls = [req("par" if safe else "ex", str(i), delay) for i, (safe, delay) in enumerate(plan)]
    results = await registry.invoke_batch(calls)
    assert [r.value for r in results] == [str(i) for i in range(len(plan))]
    assert probe.peak <= limit
    log = probe.log
    for i, (safe, _) in enumerate(plan):
        if safe:
            continue
        start, end = log.index(f"start {i}"), log.index(f"end {i}")
        assert end == start + 1  # an exclusive call overlaps nothing
        for j in range(len(plan)):
            if j < i:
                assert log.index(f"end {j}") < start
            elif j > i:
                assert log.index(f"start {j}") > end
