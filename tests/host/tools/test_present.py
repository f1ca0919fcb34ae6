"""Presentation: call and result cards from arguments and the persisted result only."""

from __future__ import annotations

from typing import Any

import pytest

from host.tools import (
    GenericCard,
    ReadCard,
    SearchCard,
    ToolRegistry,
    ToolsConfig,
    card_to_dict,
    define_tool,
    present_call,
    present_result,
    schema,
)


def reader(**options: Any) -> Any:
    return define_tool(
        name="read_file",
        description="",
        parameters={"path": schema.string(required=True)},
        output={
            "schema": schema.string(),
            "presentation_meta": lambda args, value: {"lines": value.count("\n") + 1},
        },
        execute=lambda args, ctx: "one\ntwo",
        **options,
    )


def test_generic_fallbacks() -> None:
    definition = reader()
    call_card = present_call(definition, {"path": "/a"})
    assert call_card == GenericCard(title="read_file", body='{"path":"/a"}')
    persisted = {"is_error": True, "content": [{"type": "text", "text": "Error: x"}]}
    assert present_result(definition, {"path": "/a"}, persisted) == GenericCard(
        title="read_file", body="Error: x", is_error=True
    )


@pytest.mark.anyio
async def test_tool_cards_from_args_and_persisted_result() -> None:
    def card_for_result(args: Any, result: Any) -> ReadCard:
        lines = result["meta"]["presentation"]["lines"]
        return ReadCard(path=args["path"], text=result["value"], start_line=lines)

    definition = reader(
        present_call=lambda args: SearchCard(query=args["path"], items=("a",)),
        present_result=card_for_result,
    )
    registry = ToolRegistry(ToolsConfig(timeout_policy=False, repeat_reminder=None))
    registry.register(definition)
    persisted = (await registry.invoke("read_file", {"path": "/a"})).to_dict()
    assert persisted["meta"] == {"presentation": {"lines": 2}}
    card = present_result(definition, {"path": "/a"}, persisted)
    assert card == ReadCard(path="/a", text="one\ntwo", start_line=2)
    assert card_to_dict(present_call(definition, {"path": "/a"})) == {
        "kind": "search",
        "query": "/a",
        "items": ["a"],
        "truncated": False,
        "total": None,
    }


def test_broken_or_unknown_cards_fall_back() -> None:
    def broken(args: Any) -> Any:
        raise RuntimeError("ui bug")

    definition = reader(present_call=broken, present_result=lambda args, result: "not a card")
    assert isinstance(present_call(definition, {}), GenericCard)
    assert isinstance(present_result(definition, {}, {"content": []}), GenericCard)


def test_a_broken_card_hook_is_logged_not_silent(caplog: pytest.LogCaptureFixture) -> None:
    def broken(*args: Any) -> Any:
        raise RuntimeError("ui bug")

    definition = reader(present_call=broken, present_result=broken)
    assert isinstance(present_call(definition, {}), GenericCard)
    assert isinstance(present_result(definition, {}, {"content": []}), GenericCard)
    records = [r for r in caplog.records if r.name == "host.tools"]
    assert [r.getMessage() for r in records] == [
        "present_call of 'read_file' failed",
        "present_result of 'read_file' failed",
    ]
    assert all(r.levelname == "ERROR" and r.exc_info is not None for r in records)


def test_a_card_hook_returning_no_card_is_logged(caplog: pytest.LogCaptureFixture) -> None:
    definition = reader(present_call=lambda args: "text", present_result=lambda a, r: 3)
    assert isinstance(present_call(definition, {}), GenericCard)
    assert isinstance(present_result(definition, {}, {"content": []}), GenericCard)
    assert [(r.levelname, r.getMessage()) for r in caplog.records if r.name == "host.tools"] == [
        ("WARNING", "present_call of 'read_file' returned str, not a card"),
        ("WARNING", "present_result of 'read_file' returned int, not a card"),
    ]
    caplog.clear()
    quiet = reader(present_call=lambda args: None, present_result=lambda a, r: None)
    assert isinstance(present_call(quiet, {}), GenericCard)  # None: "no card of my own"
    assert isinstance(present_result(quiet, {}, {"content": []}), GenericCard)
    assert caplog.records == []
