"""ToolResult: the one JSON shape, content normalization and contexts."""

from __future__ import annotations

import pytest

from host.tools import ErrorCode, ToolResult, normalize_content, user_context


def test_success_dict_shape() -> None:
    result = ToolResult.success({"n": [1]}, "done")
    assert result.to_dict() == {
        "is_error": False,
        "value": {"n": [1]},
        "content": [{"type": "text", "text": "done"}],
    }
    assert result.code is None


def test_success_value_none_is_kept() -> None:
    assert ToolResult.success(None, "x").to_dict()["value"] is None


def test_failure_dict_shape_with_all_keys() -> None:
    result = ToolResult.failure(
        ErrorCode.DENIED, "nope", meta={"k": 1}, additional_contexts=["remember"]
    )
    assert result.to_dict() == {
        "is_error": True,
        "error": {"message": "nope", "info": {"name": "ToolDeniedError", "code": "DENIED"}},
        "content": [{"type": "text", "text": "Error: nope"}],
        "meta": {"k": 1},
        "additional_contexts": [
            {"role": "user", "content": [{"type": "text", "text": "remember"}]}
        ],
    }
    assert result.code is ErrorCode.DENIED


def test_to_dict_returns_plain_fresh_containers() -> None:
    result = ToolResult.success({"a": [1]}, "x")
    out = result.to_dict()
    assert type(out["value"]) is dict
    assert type(out["value"]["a"]) is list
    out["value"]["a"].append(2)
    assert result.value == {"a": [1]}


def test_result_value_is_frozen() -> None:
    result = ToolResult.success({"a": [1]}, "x")
    with pytest.raises(TypeError):
        result.value["a"].append(2)


def test_content_normalization() -> None:
    image = {"type": "image", "data": "aGk=", "mime_type": "image/png"}
    assert normalize_content("hi") == [{"type": "text", "text": "hi"}]
    assert normalize_content([image, "x"]) == [image, {"type": "text", "text": "x"}]
    assert normalize_content({"type": "text", "text": "t"}) == [{"type": "text", "text": "t"}]
    with pytest.raises(TypeError):
        normalize_content([{"type": "video"}])
    with pytest.raises(TypeError):
        normalize_content(42)


def test_user_context_with_source() -> None:
    context = user_context("look", source={"kind": "plugin", "plugin": "p"})
    assert context == {
        "role": "user",
        "content": [{"type": "text", "text": "look"}],
        "source": {"kind": "plugin", "plugin": "p"},
    }
    assert user_context(context) == context


def test_every_code_has_a_name() -> None:
    for code in ErrorCode:
        assert ToolResult.failure(code, "m").to_dict()["error"]["info"]["code"] == code.value
