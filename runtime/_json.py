"""The lossless-JSON rule: what a result, a binding argument or a reply may be."""

from __future__ import annotations

import math
from typing import Any

__all__ = ("MAX_DEPTH", "json_problem")

#: Deepest nesting accepted; msgspec's encoder recurses, so deeper values cannot cross the pipe.
MAX_DEPTH = 500

_SCALARS = (str, int, bool, type(None))
#: Python's default limit on int <-> str conversion (sys.int_max_str_digits): JSON cannot
#: carry a longer integer through a default interpreter, ours or the reader's.
_MAX_INT_DIGITS = 4300
_MAX_INT_BITS = int(_MAX_INT_DIGITS * 3.3219280948873626)  # log2(10)
_ENTER, _EXIT = 0, 1


def _path_text(path: list[str | int]) -> str:
    parts = ["$"]
    for step in path:
        parts.append(f"[{step}]" if isinstance(step, int) else _key_text(step))
    text = "".join(parts)
    return text if len(text) <= 200 else text[:97] + "…" + text[-100:]


def _key_text(key: str) -> str:
    return f".{key}" if key.isidentifier() else f"[{key!r}]"


def _describe(value: object) -> str:
    kind = type(value)
    if kind is float:
        return f"non-finite float {value!r}"
    if kind.__name__ == "coroutine":
        return "a coroutine (did you forget `await`?)"
    name = kind.__qualname__
    if isinstance(value, str | int | float | dict | list):
        return f"{name} (a subclass of {_base_name(value)}; only the plain type is JSON)"
    return name


def _base_name(value: object) -> str:
    for base in (bool, int, float, str, dict, list):
        if isinstance(value, base):
            return base.__name__
    return "object"


def json_problem(value: Any) -> str | None:
    """Say what keeps ``value`` from being lossless JSON, and where (``$.items[3]``); None if it is.

    Walks an explicit stack, so any nesting is checked without recursion; a cycle,
    a tuple, a set, bytes, NaN, a dict with non-str keys or a subclass are problems.
    """
    path: list[str | int] = []
    on_path: set[int] = set()
    stack: list[tuple[int, Any, str | int | None]] = [(_ENTER, value, None)]
    while stack:
        action, item, step = stack.pop()
        if action == _EXIT:
            on_path.discard(id(item))
            if step is not None:
                path.pop()
            continue
        if step is not None:
            path.append(step)
        kind = type(item)
        if kind in _SCALARS:
            if kind is int and item.bit_length() > _MAX_INT_BITS:
                return f"an integer of more than {_MAX_INT_DIGITS} digits at {_path_text(path)}"
            if step is not None:
                path.pop()
            continue
        if kind is float:
            if not math.isfinite(item):
                return f"{_describe(item)} at {_path_text(path)}"
            if step is not None:
                path.pop()
            continue
        if kind is not dict and kind is not list:
            return f"{_describe(item)} at {_path_text(path)}"
        if id(item) in on_path:
            return f"a cycle at {_path_text(path)} (the value contains itself)"
        if len(on_path) >= MAX_DEPTH:
            return f"nesting deeper than {MAX_DEPTH} levels at {_path_text(path)}"
        on_path.add(id(item))
        stack.append((_EXIT, item, step))
        if kind is dict:
            children: list[tuple[int, Any, str | int | None]] = []
            for key, child in item.items():
                if type(key) is not str:
                    # never repr() a foreign object here: its __repr__ is the program's code
                    shown = f" {key!r}" if type(key) in (int, float, bool, type(None)) else ""
                    return f"a {type(key).__qualname__} key{shown} at {_path_text(path)}"
                children.append((_ENTER, child, key))
            stack.extend(reversed(children))
        else:
            stack.extend((_ENTER, item[i], i) for i in range(len(item) - 1, -1, -1))
    return None
