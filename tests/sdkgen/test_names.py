"""Tests for the naming rules: tool-name escaping, the reverse map, type names."""

from __future__ import annotations

import keyword

from hypothesis import given
from hypothesis import strategies as st

import sdkgen
from sdkgen._names import TypeNames, camel, escape_tool_name, is_py_name, python_tool_names


def test_escape_rules() -> None:
    assert escape_tool_name("read_file") == "read_file"
    assert escape_tool_name("github.create-issue") == "github_create_issue"
    assert escape_tool_name("2fa") == "_2fa"
    assert escape_tool_name("") == "_"
    assert escape_tool_name("import") == "import_"
    assert escape_tool_name("__init__") == "tool__init__"
    assert escape_tool_name("naïve") == "na_ve"
    assert escape_tool_name("list") == "list_"  # would shadow `list[...]` in the stub
    assert escape_tool_name("match") == "match"  # soft keywords are valid attribute names


def test_collisions_suffix_in_sorted_order_and_valid_names_win() -> None:
    names = python_tool_names(["get.file", "get_file", "get-file", "get_file_2"])
    assert names == {
        "get-file": "get_file_3",
        "get.file": "get_file_4",
        "get_file": "get_file",
        "get_file_2": "get_file_2",
    }


def test_python_names_is_the_reverse_map() -> None:
    manifest: list[dict[str, object]] = [
        {"name": n, "parameters": {}} for n in ("b-x", "a.y", "class")
    ]
    assert sdkgen.python_names(manifest) == {"a_y": "a.y", "b_x": "b-x", "class_": "class"}


@given(st.lists(st.text(max_size=12), unique=True, max_size=12))
def test_escaped_names_are_unique_identifiers(names: list[str]) -> None:
    mapping = python_tool_names(names)
    escaped = list(mapping.values())
    assert sorted(mapping) == sorted(names)
    assert len(set(escaped)) == len(escaped)
    for name in escaped:
        assert name.isascii() and name.isidentifier() and not keyword.iskeyword(name)
        assert not name.startswith("__")


def test_is_py_name() -> None:
    assert is_py_name("path")
    assert not is_py_name("from")
    assert not is_py_name("content-type")
    assert not is_py_name("ﬁle")  # NFKC would turn it into `file`
    assert not is_py_name("__private")


def test_camel_and_type_names() -> None:
    assert camel("read_file") == "ReadFile"
    assert camel("getURL") == "GetURL"
    assert camel("3d-view") == "T3dView"
    assert camel("") == "T"
    names = TypeNames()
    assert names.allocate("Options") == "Options"
    assert names.allocate("Options") == "Options_2"
    assert names.allocate("Node") == "Node_2"  # a DOM global in TypeScript
    assert names.allocate("None") == "None_2"
