"""Small tool factories shared by the host.tools tests."""

from __future__ import annotations

from typing import Any

from host.tools import (
    ToolCall,
    ToolDefinition,
    ToolRegistry,
    ToolResult,
    ToolRunContext,
    ToolsConfig,
    define_tool,
    schema,
)

QUIET = ToolsConfig(timeout_policy=False, repeat_reminder=None)
"""A registry config without the guard plugins."""


def echo(name: str = "echo", **options: Any) -> ToolDefinition:
    """A sync tool returning its ``text`` argument."""

    def run(args: Any, ctx: ToolRunContext) -> Any:
        return args.get("text", "")

    return define_tool(
        name=name,
        description=f"The {name} tool.",
        parameters={"text": schema.string()},
        output={"schema": schema.string()},
        execute=run,
        **options,
    )


def traced_registry(trace: list[str], **tool_options: Any) -> ToolRegistry:
    """A registry whose tool ``t`` and hooks append each stage they run to ``trace``."""
    registry = ToolRegistry(QUIET)

    async def run(args: Any, ctx: ToolRunContext) -> Any:
        trace.append("body")
        return args["text"]

    def finalize(result: ToolResult) -> Any:
        trace.append("finalize")
        return None

    registry.register(
        define_tool(
            name="t",
            description="",
            parameters={"text": schema.string(required=True)},
            output={"schema": schema.string()},
            execute=run,
            finalize_content=finalize,
            **tool_options,
        )
    )

    def pre(call: ToolCall, decision: Any) -> None:
        trace.append("pre")

    def guard(call: ToolCall) -> None:
        trace.append("guard")

    async def wrap(call: ToolCall, next_: Any) -> ToolResult:
        trace.append("wrap>")
        result: ToolResult = await next_()
        trace.append("<wrap")
        return result

    def post(call: ToolCall, result: ToolResult) -> None:
        trace.append("post")

    registry.pre_execute(pre)
    registry.guard(guard)
    registry.wrap_execute(wrap)
    registry.post_execute(post)
    registry.on("result", lambda event: trace.append("result"))
    return registry
