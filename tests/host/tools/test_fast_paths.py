"""The per-call shortcuts behave like the general paths they skip."""

from __future__ import annotations

import json
import math
from typing import Any

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from host.tools import (
    AbortController,
    ErrorCode,
    FrozenDict,
    FrozenList,
    Node,
    RepeatReminderConfig,
    RepeatToolReminder,
    ToolCall,
    ToolRegistry,
    ToolResult,
    ToolRunContext,
    ToolsConfig,
    canonical_json,
    define_tool,
    freeze,
    fuse_signals,
    normalize_content,
    schema,
    thaw,
    timeout_policy,
    validate,
)
from host.tools._validate import _walk

from .helpers import QUIET, echo
from .strategies import json_values, nodes, values_for

# -- validation --------------------------------------------------------------------------------

flat_objects = st.builds(
    lambda props, extra: schema.object(props, additional_properties=extra),
    st.dictionaries(
        st.sampled_from(["a", "b", "c"]),
        st.sampled_from(
            [schema.integer(required=True), schema.string(), schema.json(), schema.null()]
        ),
        max_size=3,
    ),
    st.booleans() | st.just(schema.integer()),
)


@settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow])
@given(st.data(), nodes | flat_objects)
def test_validate_gives_the_message_of_the_full_walk(data: st.DataObject, node: Node) -> None:
    value = data.draw(values_for(node) | json_values)
    assert validate(node, value) == _walk(node, value)


def test_flat_object_errors_are_the_walks_first_error() -> None:
    node = schema.object(
        {"a": schema.integer(required=True), "b": schema.string()}, additional_properties=False
    )
    assert validate(node, {"a": 1, "b": "x"}) is None
    assert validate(node, {"b": 1, "a": "x"}) == "$.b: expected string, got integer 1"
    assert validate(node, {"a": 1, "z": [1]}) == "$.z: unexpected property (not allowed here)"
    assert validate(node, {"b": "x"}) == "$.a: missing required property"
    assert validate(node, {1: 1}) == "$: expected an object with string keys, got key 1"
    inner = schema.object({"n": schema.integer()}, additional_properties=True)
    nested = schema.object({"a": inner}, additional_properties=True)
    assert validate(nested, {"a": {"n": "x"}}) == '$.a.n: expected integer, got string "x"'


def test_json_leaf_values_skip_the_walk_with_the_same_answer() -> None:
    for value in (None, True, 3, 1.5, "s", math.nan, (1,)):
        assert validate(schema.json(), value) == _walk(schema.json(), value)


# -- JSON text and frozen values -------------------------------------------------------------

scalars = st.none() | st.booleans() | st.integers() | st.floats() | st.text() | st.just(10**40)


@given(scalars, st.booleans())
def test_canonical_scalars_match_json_dumps(value: Any, sort_keys: bool) -> None:
    expected = json.dumps(value, sort_keys=sort_keys, separators=(",", ":"), ensure_ascii=False)
    assert canonical_json(value, sort_keys=sort_keys) == expected


def test_canonical_json_refuses_huge_ints_as_before() -> None:
    with pytest.raises(ValueError, match="digits"):
        canonical_json(10**5000)


def test_freeze_keeps_leaves_and_copies_containers() -> None:
    for leaf in (None, True, 3, 1.5, "s"):
        assert freeze(leaf) is leaf
    source = {"a": [1]}
    frozen = freeze(source)
    assert isinstance(frozen, FrozenDict)
    assert isinstance(frozen["a"], FrozenList)
    assert freeze(frozen) is frozen
    flat = {"a": 1, "b": None}
    assert type(freeze(flat)) is FrozenDict
    assert freeze(flat) == flat
    assert freeze(flat) is not flat
    assert type(thaw(freeze([1, "x"]))) is list


def test_text_content_is_the_frozen_text_part() -> None:
    content = normalize_content("hi")
    assert type(content) is FrozenList
    assert type(content[0]) is FrozenDict
    assert content == [{"type": "text", "text": "hi"}]
    assert content == normalize_content(["hi"])


# -- signals ---------------------------------------------------------------------------------


def test_fusing_a_signal_with_itself_gives_a_detachable_copy() -> None:
    controller = AbortController()
    fused, dispose = fuse_signals(controller.signal, controller.signal)
    assert fused is not controller.signal
    controller.abort("why")
    assert fused.reason == "why"
    again = AbortController()
    fused, dispose = fuse_signals(again.signal, again.signal)
    dispose()
    again.abort()
    assert not fused.is_set()


# -- hooks -----------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_hooks_added_and_disposed_between_calls_take_effect() -> None:
    registry = ToolRegistry(ToolsConfig(repeat_reminder=None))  # with the timeout policy
    registry.register(echo())
    registry.register(echo("timed", timeout_ms=5000))
    trace: list[str] = []

    async def wrap(call: ToolCall, next_: Any) -> ToolResult:
        trace.append("wrap")
        result: ToolResult = await next_()
        return result

    async def both() -> None:
        for name in ("echo", "timed"):
            assert not (await registry.invoke(name, {"text": "x"})).is_error

    await both()  # both wrapper snapshots are built before the hooks change
    disposers = [
        registry.pre_execute(lambda call, decision: trace.append("pre")),
        registry.guard(lambda call: trace.append("guard")),
        registry.wrap_execute(wrap),
        registry.post_execute(lambda call, result: trace.append("post")),
    ]
    await both()
    assert trace == ["pre", "guard", "wrap", "post"] * 2
    for dispose in disposers:
        dispose()
    trace.clear()
    await both()
    assert trace == []


@pytest.mark.anyio
async def test_a_hook_disposed_mid_call_still_runs_in_that_call_only() -> None:
    registry = ToolRegistry(QUIET)
    registry.register(echo())
    trace: list[str] = []
    disposers: list[Any] = []

    def first(call: ToolCall, decision: Any) -> None:
        trace.append("first")
        disposers[0]()

    registry.pre_execute(first, order=1)
    disposers.append(registry.pre_execute(lambda c, d: trace.append("second"), order=2))
    await registry.invoke("echo", {"text": "x"})
    await registry.invoke("echo", {"text": "x"})
    assert trace == ["first", "second", "first"]


def _tool(name: str, timeout_ms: int | None, seconds: float = 0) -> Any:
    async def run(args: Any, ctx: ToolRunContext) -> Any:
        await anyio.sleep(seconds)
        return "done"

    return define_tool(name=name, description="", parameters={}, execute=run, timeout_ms=timeout_ms)


@pytest.mark.anyio
async def test_timeout_policy_still_wraps_timed_tools_inside_outer_wrappers() -> None:
    registry = ToolRegistry(ToolsConfig(repeat_reminder=None))
    registry.register(_tool("slow", 30, seconds=5))
    registry.register(_tool("plain", None))
    seen: list[tuple[str, Any]] = []

    async def outer(call: ToolCall, next_: Any) -> ToolResult:
        result: ToolResult = await next_()
        seen.append((call.name, result.code))
        return result

    registry.wrap_execute(outer, order=-2000)
    with anyio.fail_after(5):
        assert (await registry.invoke("slow", {})).code is ErrorCode.TOOL_TIMEOUT
    assert (await registry.invoke("plain", {})).value == "done"
    assert seen == [("slow", ErrorCode.TOOL_TIMEOUT), ("plain", None)]


@pytest.mark.anyio
async def test_timeouts_follow_the_definition_a_scope_resolves() -> None:
    registry = ToolRegistry(ToolsConfig(repeat_reminder=None))
    registry.register(_tool("t", None, seconds=0.1))
    agent = registry.agent_scope()
    agent.register(_tool("t", 20, seconds=5))
    with anyio.fail_after(5):
        assert (await registry.invoke("t", {}, scope=agent)).code is ErrorCode.TOOL_TIMEOUT
    assert (await registry.invoke("t", {})).value == "done"


@pytest.mark.anyio
async def test_a_timeout_policy_the_host_adds_itself_still_applies() -> None:
    registry = ToolRegistry(QUIET)
    registry.register(_tool("slow", 20, seconds=5))
    registry.wrap_execute(timeout_policy)
    with anyio.fail_after(5):
        assert (await registry.invoke("slow", {})).code is ErrorCode.TOOL_TIMEOUT


# -- the reminder's name filter ----------------------------------------------------------------


def test_tracks_follows_each_reminders_own_patterns() -> None:
    default = RepeatToolReminder()
    only_grep = RepeatToolReminder(RepeatReminderConfig(include=("gr*",), exclude=()))
    listed = RepeatToolReminder(RepeatReminderConfig(exclude=["grep"]))  # type: ignore[arg-type]
    assert [default.tracks(n) for n in ("grep", "todo_write")] == [True, False]
    assert [only_grep.tracks(n) for n in ("grep", "read")] == [True, False]
    assert [listed.tracks(n) for n in ("grep", "read")] == [False, True]
