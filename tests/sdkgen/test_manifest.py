"""Tests for reading manifests: both item shapes, validation errors, description cleanup."""

from __future__ import annotations

from typing import Any

import pytest

import sdkgen
from sdkgen._manifest import clean_text, read_manifest

PARAMS = {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]}
OUTPUT = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}


def test_host_and_mcp_shapes_give_the_same_sdk() -> None:
    host = [{"name": "t", "description": "D.", "parameters": PARAMS, "output": OUTPUT}]
    mcp = [{"name": "t", "description": "D.", "inputSchema": PARAMS, "outputSchema": OUTPUT}]
    wrapped = {"tools": mcp}
    assert sdkgen.python_sdk(host) == sdkgen.python_sdk(mcp) == sdkgen.python_sdk(wrapped)
    assert sdkgen.typescript_sdk(host) == sdkgen.typescript_sdk(mcp)
    assert "async def t(*, a: str) -> TResult:" in sdkgen.python_sdk(host)


def test_shapes_may_mix_per_item_and_output_may_be_wrapped() -> None:
    tools = read_manifest(
        [
            {"name": "b", "inputSchema": PARAMS},
            {"name": "a", "parameters": PARAMS, "output": {"schema": OUTPUT, "render": None}},
        ]
    )
    assert [t.name for t in tools] == ["a", "b"]
    assert tools[0].output == OUTPUT
    assert tools[1].output is None
    assert tools[1].description == ""


@pytest.mark.parametrize(
    ("manifest", "message"),
    [
        ("tools", "a manifest is a list"),
        ({"tools": 3}, "'tools' list"),
        ([3], "tool #0 is not an object"),
        ([{"description": "x"}], "tool #0 has no name"),
        ([{"name": ""}], "tool #0 has no name"),
        ([{"name": "a"}, {"name": "a"}], "appears twice"),
        ([{"name": "a", "description": 3}], "description is not a string"),
        ([{"name": "a", "parameters": []}], "parameters is not a JSON Schema object"),
        ([{"name": "a", "outputSchema": "x"}], "outputSchema is not a JSON Schema object"),
    ],
)
def test_bad_manifests_raise_manifest_error(manifest: Any, message: str) -> None:
    with pytest.raises(sdkgen.ManifestError, match=message):
        sdkgen.python_sdk(manifest)
    assert issubclass(sdkgen.ManifestError, ValueError)


def test_clean_text() -> None:
    assert clean_text("  One.\r\n    two\r      three\n\n") == "One.\ntwo\n  three"
    assert clean_text("a\x00b\x1bc\td") == "a b c    d"
    assert clean_text("x\u2028y") == "x\ny"
    assert clean_text("bad \ud800 surrogate") == "bad \ufffd surrogate"
    assert clean_text("\n\n  \n") == ""
