"""The registry: scopes, shadowing, restrict masks, run_code, presentation mode, manifest, events."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from host.tools import (
    RUN_CODE,
    ReservedToolNameError,
    ScopeError,
    ToolDefinitionError,
    ToolRegistry,
    ToolsConfig,
    anthropic_tools,
    openai_tools,
)

from .helpers import echo


def names(registry: ToolRegistry, scope: Any = None) -> list[str]:
    return [entry.name for entry in registry.schemas(scope)]


def test_register_get_and_dispose() -> None:
    registry = ToolRegistry()
    tool = echo()
    dispose = registry.register(tool)
    assert registry.get("echo") is tool
    with pytest.raises(ToolDefinitionError, match="'echo' is already registered"):
        registry.register(echo())
    dispose()
    dispose()
    assert registry.get("echo") is None


def test_register_rejects_non_definitions() -> None:
    with pytest.raises(ToolDefinitionError, match="not a tool definition: 'echo'"):
        ToolRegistry().register("echo")  # type: ignore[arg-type]


def test_agent_scope_shadows_global() -> None:
    registry = ToolRegistry()
    global_tool, agent_tool = echo(), echo()
    registry.register(global_tool)
    agent = registry.agent_scope()
    agent.register(agent_tool)
    assert registry.get("echo", agent) is agent_tool
    assert registry.get("echo") is global_tool
    sub = registry.agent_scope(agent)
    assert registry.get("echo", sub) is agent_tool


def test_restrict_only_on_agent_scopes_and_present_as_too() -> None:
    registry = ToolRegistry()
    with pytest.raises(ScopeError):
        registry.root.restrict(allow=["a"])
    with pytest.raises(ScopeError):
        registry.root.present_as("code")
    agent = registry.agent_scope()
    with pytest.raises(ValueError, match="exactly one"):
        agent.restrict()
    with pytest.raises(ValueError, match="exactly one"):
        agent.restrict(allow=["a"], deny=["b"])


def test_allow_mask_hides_unlisted_and_later_tools() -> None:
    registry = ToolRegistry()
    registry.register(echo("read"))
    registry.register(echo("write"))
    agent = registry.agent_scope()
    agent.restrict(allow=["read"])
    registry.register(echo("later"))
    assert names(registry, agent) == ["read"]
    assert names(registry) == ["later", "read", "write"]


def test_deny_mask_lets_later_unlisted_tools_through() -> None:
    registry = ToolRegistry()
    registry.register(echo("read"))
    registry.register(echo("write"))
    agent = registry.agent_scope()
    agent.restrict(deny=["write", "bash"])
    registry.register(echo("later"))
    registry.register(echo("bash"))
    assert names(registry, agent) == ["later", "read"]


def test_own_registrations_are_exempt() -> None:
    registry = ToolRegistry()
    registry.register(echo("read"))
    registry.register(echo("report"))
    agent = registry.agent_scope()
    agent.restrict(allow=["read"])
    own = echo("report")
    agent.register(own)
    agent.register(echo("submit"))
    assert names(registry, agent) == ["read", "report", "submit"]
    assert registry.get("report", agent) is own


def test_masks_intersect() -> None:
    registry = ToolRegistry()
    for name in ("a", "b", "c", "d"):
        registry.register(echo(name))
    agent = registry.agent_scope()
    agent.restrict(allow=["a", "b", "c"])
    agent.restrict(allow=["b", "c", "d"])
    agent.restrict(deny=["c"])
    assert names(registry, agent) == ["b"]


def test_ancestor_masks_reach_every_nested_scope() -> None:
    registry = ToolRegistry()
    for name in ("a", "b", "c"):
        registry.register(echo(name))
    parent = registry.agent_scope()
    parent.restrict(deny=["a"])
    child = registry.agent_scope(parent)
    grandchild = registry.agent_scope(child)
    child.restrict(deny=["b"])
    assert names(registry, parent) == ["b", "c"]
    assert names(registry, child) == ["c"]
    assert names(registry, grandchild) == ["c"]
    grandchild.register(echo("a"))
    assert names(registry, grandchild) == ["a", "c"]


def test_parent_mask_applies_to_tools_the_parent_inherits_not_to_child_tools() -> None:
    registry = ToolRegistry()
    parent = registry.agent_scope()
    parent.restrict(allow=["x"])
    child = registry.agent_scope(parent)
    child.register(echo("y"))
    grandchild = registry.agent_scope(child)
    assert names(registry, grandchild) == ["y"]
    parent.register(echo("z"))  # the parent's own tool passes its own mask
    assert names(registry, grandchild) == ["y", "z"]


def test_disposing_a_mask_restores_visibility() -> None:
    registry = ToolRegistry()
    registry.register(echo("a"))
    agent = registry.agent_scope()
    undo = agent.restrict(deny=["a"])
    assert names(registry, agent) == []
    undo()
    assert names(registry, agent) == ["a"]


@given(
    st.lists(st.sampled_from("abcde"), unique=True),
    st.lists(
        st.tuples(st.booleans(), st.sets(st.sampled_from("abcde"))),
        max_size=3,
    ),
)
def test_masks_match_a_set_model(globals_: list[str], masks: list[tuple[bool, set[str]]]) -> None:
    registry = ToolRegistry()
    for name in globals_:
        registry.register(echo(name))
    agent = registry.agent_scope()
    expected = set(globals_)
    for is_allow, listed in masks:
        if is_allow:
            agent.restrict(allow=listed)
            expected &= listed
        else:
            agent.restrict(deny=listed)
            expected -= listed
    assert names(registry, agent) == sorted(expected)


def test_run_code_is_reserved() -> None:
    registry = ToolRegistry()
    agent = registry.agent_scope()
    with pytest.raises(ReservedToolNameError):
        registry.register(echo(RUN_CODE))
    with pytest.raises(ReservedToolNameError):
        agent.register(echo(RUN_CODE))
    with pytest.raises(ReservedToolNameError):
        agent.restrict(deny=[RUN_CODE])
    with pytest.raises(ReservedToolNameError):
        agent.restrict(allow=RUN_CODE)
    run_code = echo(RUN_CODE)
    registry.install_run_code(run_code)
    with pytest.raises(ReservedToolNameError):
        registry.install_run_code(echo(RUN_CODE))
    with pytest.raises(ToolDefinitionError, match="needs a tool named 'run_code'"):
        ToolRegistry().install_run_code(echo("other"))
    agent.restrict(allow=["nothing"])
    assert registry.get(RUN_CODE, agent) is run_code
    assert RUN_CODE not in names(registry, agent)
    assert all(entry["name"] != RUN_CODE for entry in registry.manifest(agent))


def test_presentation_mode() -> None:
    registry = ToolRegistry(ToolsConfig(mode="both"))
    agent = registry.agent_scope()
    sub = registry.agent_scope(agent)
    assert registry.mode() == "both"
    assert agent.mode == "both"
    agent.present_as("code")
    assert registry.mode(agent) == "code"
    assert sub.mode == "both"
    with pytest.raises(ValueError, match="mode"):
        agent.present_as("fancy")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="mode"):
        ToolRegistry(ToolsConfig(mode="fancy"))  # type: ignore[arg-type]


def test_manifest_is_sorted_and_omits_missing_output() -> None:
    registry = ToolRegistry()
    registry.register(echo("zeta"))
    agent = registry.agent_scope()
    agent.register(echo("alpha"))

    def run(args: Any, ctx: Any) -> None:
        return None

    from host.tools import define_tool

    registry.register(define_tool(name="mid", description="d", parameters={}, execute=run))
    manifest = registry.manifest(agent)
    assert [entry["name"] for entry in manifest] == ["alpha", "mid", "zeta"]
    assert manifest[0] == {
        "name": "alpha",
        "description": "The alpha tool.",
        "parameters": {
            "type": "object",
            "properties": {"text": {"type": "string"}},
            "additionalProperties": False,
        },
        "output": {"type": "string"},
    }
    assert "output" not in manifest[1]
    assert [entry["name"] for entry in registry.manifest()] == ["mid", "zeta"]


def test_native_tool_formats() -> None:
    registry = ToolRegistry()
    registry.register(echo())
    params = registry.schemas()[0].parameters
    assert openai_tools(registry.schemas()) == [
        {
            "type": "function",
            "function": {"name": "echo", "description": "The echo tool.", "parameters": params},
        }
    ]
    assert anthropic_tools(registry.schemas()) == [
        {"name": "echo", "description": "The echo tool.", "input_schema": params}
    ]


def test_events_subscribe_emit_dispose() -> None:
    registry = ToolRegistry()
    seen: list[Any] = []
    dispose = registry.on("tool/code-dispatch", seen.append)

    def broken(_payload: Any) -> None:
        raise RuntimeError("observer bug")

    registry.on("tool/code-dispatch", broken)
    registry.emit("tool/code-dispatch", 1)
    dispose()
    registry.emit("tool/code-dispatch", 2)
    assert seen == [1]


def test_scopes_of_another_registry_are_refused() -> None:
    other = ToolRegistry().agent_scope()
    registry = ToolRegistry()
    with pytest.raises(ScopeError):
        registry.get("x", other)
    with pytest.raises(ScopeError):
        registry.agent_scope(other)
