"""ToolCallError and the builtin exception types a failed binding call is raised as."""

from __future__ import annotations

import builtins
import pickle

import pytest
from hypothesis import given
from hypothesis import strategies as st

from runtime import ToolCallError
from runtime.lowlevel import RECREATED_EXCEPTIONS, builtin_exception_name, tool_call_error


@pytest.mark.parametrize("name", sorted(RECREATED_EXCEPTIONS))
def test_every_recreated_type_is_both_the_builtin_and_a_tool_call_error(name: str) -> None:
    error = tool_call_error("tools.t", "it failed", "TOOL_ERROR", name)
    assert isinstance(error, ToolCallError)
    assert isinstance(error, getattr(builtins, name))
    assert type(error).__name__ == name
    assert (error.tool, error.message, error.code) == ("tools.t", "it failed", "TOOL_ERROR")
    assert str(error) == "tools.t: it failed (TOOL_ERROR)"
    assert builtin_exception_name(error) == name
    assert type(tool_call_error("x", "y", "Z", name)) is type(error)  # one class per name


@pytest.mark.parametrize(
    "name",
    [
        None,
        "",
        "Exception",
        "BaseException",
        "SystemExit",
        "KeyboardInterrupt",
        "GeneratorExit",
        "StopIteration",
        "ExceptionGroup",
        "UnicodeDecodeError",
        "ToolCallError",
        "os.system",
        "print",
        "int",
        "__import__",
    ],
)
def test_other_names_give_a_plain_tool_call_error(name: str | None) -> None:
    assert type(tool_call_error("t", "m", "TOOL_ERROR", name)) is ToolCallError


@given(st.text(max_size=40))
def test_only_a_recreated_name_makes_more_than_a_tool_call_error(name: str) -> None:
    error = tool_call_error("t", "m", "C", name)
    if name in RECREATED_EXCEPTIONS:
        assert type(error).__mro__[1:3] == (ToolCallError, RECREATED_EXCEPTIONS[name])
    else:
        assert type(error) is ToolCallError


def test_the_recreated_types_are_the_builtin_exceptions_less_the_unsafe() -> None:
    assert {"ZeroDivisionError", "KeyError", "ValueError", "OSError", "TypeError"} <= set(
        RECREATED_EXCEPTIONS
    )
    assert "IOError" not in RECREATED_EXCEPTIONS  # an alias: OSError is the name
    assert all(issubclass(cls, Exception) for cls in RECREATED_EXCEPTIONS.values())


def test_the_name_is_the_nearest_builtin_base() -> None:
    import json

    with pytest.raises(json.JSONDecodeError) as caught:
        json.loads("{")
    assert builtin_exception_name(caught.value) == "ValueError"  # JSONDecodeError's base

    class Own(Exception):
        pass

    assert builtin_exception_name(Own()) is None
    assert builtin_exception_name(UnicodeDecodeError("utf-8", b"", 0, 1, "x")) == "UnicodeError"
    assert builtin_exception_name(KeyboardInterrupt()) is None
    assert builtin_exception_name(ToolCallError("t", "m")) is None


def test_a_recreated_error_pickles_as_a_tool_call_error_of_that_type() -> None:
    import cloudpickle

    error = tool_call_error("t", "m", "TOOL_ERROR", "KeyError")
    back = pickle.loads(cloudpickle.dumps(error))
    assert isinstance(back, KeyError)
    assert isinstance(back, ToolCallError)
    assert (back.tool, back.message, back.code) == ("t", "m", "TOOL_ERROR")
