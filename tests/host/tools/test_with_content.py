"""A tool body may attach content parts (images) after its rendered content: WithContent."""

from __future__ import annotations

from typing import Any

import pytest

from host.tools import ToolRegistry, WithContent, define_tool

pytestmark = pytest.mark.anyio

IMAGE = {"type": "image", "data": "AAAA", "mime_type": "image/png"}


async def test_parts_follow_the_rendered_content_and_the_value_is_validated() -> None:
    registry = ToolRegistry()

    async def shot(args: Any, ctx: Any) -> Any:
        return WithContent({"n": args["n"]}, [IMAGE])

    registry.register(
        define_tool(
            name="shot",
            description="A value and a picture.",
            parameters={"type": "object", "properties": {"n": {"type": "integer"}}},
            output={"schema": {"type": "object", "properties": {"n": {"type": "integer"}}}},
            execute=shot,
        )
    )
    result = (await registry.invoke("shot", {"n": 1})).to_dict()
    assert result["value"] == {"n": 1}
    assert result["content"] == [{"type": "text", "text": '{"n":1}'}, IMAGE]
    bad = await registry.invoke("shot", {"n": "x"})
    assert bad.to_dict()["error"]["info"]["code"] == "INVALID_ARGS"


async def test_a_malformed_part_is_a_rendering_failure() -> None:
    registry = ToolRegistry()

    async def broken(args: Any, ctx: Any) -> Any:
        return WithContent(1, [{"type": "image"}])

    registry.register(define_tool(name="broken", description="d", parameters={}, execute=broken))
    result = (await registry.invoke("broken", {})).to_dict()
    assert result["error"]["info"]["code"] == "TOOL_ERROR"
    assert "rendering the result failed" in result["error"]["message"]
