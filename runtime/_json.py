"""The lossless-JSON rule: what a result, a binding argument or a reply may be."""

from __future__ import annotations

import array
import inspect
import itertools
import math
from typing import Any

__all__ = (
    "MAX_DEPTH",
    "JsonTooLarge",
    "bare_repr",
    "json_problem",
    "json_values_bound",
    "nests_deeper_than",
)

#: Deepest nesting accepted; msgspec's encoder recurses, so deeper values cannot cross the pipe.
MAX_DEPTH = 500

_SCALARS = (str, int, bool, type(None))
#: Python's default limit on int <-> str conversion (sys.int_max_str_digits): JSON cannot
#: carry a longer integer through a default interpreter, ours or the reader's.
_MAX_INT_DIGITS = 4300
#: The smallest integer with one digit too many, and its bit length (a cheap first test).
_TOO_LONG = 10**_MAX_INT_DIGITS
_TOO_LONG_BITS = _TOO_LONG.bit_length()
_ENTER, _EXIT = 0, 1


class JsonTooLarge(Exception):
    """The value's JSON encoding would pass the byte budget given to ``json_problem``."""

    def __init__(self, budget: int) -> None:
        super().__init__(f"more than {budget} bytes as JSON")
        self.budget = budget


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
    if kind.__name__ == "PendingCall" and kind.__module__ == "runtime._bridge":
        return f"{value!r} (did you forget `await`?)"
    name = kind.__qualname__
    if isinstance(value, str | int | float | dict | list):
        return f"{name} (a subclass of {_base_name(value)}; only the plain type is JSON)"
    return name


def _base_name(value: object) -> str:
    for base in (bool, int, float, str, dict, list):
        if isinstance(value, base):
            return base.__name__
    return "object"


def json_problem(value: Any, max_bytes: int | None = None) -> str | None:
    """Say what keeps ``value`` from being lossless JSON, and where (``$.items[3]``); None if it is.

    Walks an explicit stack, so any nesting is checked without recursion; a cycle,
    a tuple, a set, bytes, NaN, a dict with non-str keys or a subclass are problems. With
    ``max_bytes``, raises ``JsonTooLarge`` as soon as the encoding is sure to be longer, so
    a value huge only as JSON (one row repeated a million times) costs O(max_bytes).
    """
    budget = -1 if max_bytes is None else max_bytes
    size = 0  # a lower bound of the encoding's length so far
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
        if budget >= 0:
            size += _least_size(item, step)
            if size > budget:
                raise JsonTooLarge(budget)
        if kind in _SCALARS:
            if kind is int and item.bit_length() >= _TOO_LONG_BITS and abs(item) >= _TOO_LONG:
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


def bare_repr(value: Any, problem: str) -> tuple[str | None, str]:
    """A trailing bare expression's non-JSON value as its ``repr``, as Python's REPL shows it:
    ``(text, "")``, or ``(None, why not)`` for an awaitable (a forgotten ``await`` stays a
    failure) or a ``repr`` that raised. ``problem`` is what ``json_problem`` said."""
    if inspect.isawaitable(value):
        return None, problem
    try:
        text = repr(value)
    except BaseException as exc:  # the program's __repr__ ran and failed
        return None, f"{problem}, and repr() of it raised {type(exc).__name__}"
    if not isinstance(text, str):
        return None, f"{problem}, and repr() of it is not a str"
    return text, ""


def _least_size(item: Any, step: str | int | None) -> int:
    """Bytes ``item`` takes at least in a JSON encoding, with its key and separator."""
    kind = type(item)
    if kind is str:
        own = len(item) + 2
    elif kind is int:
        own = max(1, (item.bit_length() * 3) // 10)
    elif kind is bool or item is None:
        own = 4
    else:
        own = 2 if kind is dict or kind is list else 1
    if type(step) is str:
        own += len(step) + 3  # "key":
    return own + (step is not None)  # the separator before it


_SEPARATORS = (b",", b":", b"[", b"{")


def _separators(data: bytes) -> int:
    return sum(data.count(sep) for sep in _SEPARATORS)


def json_values_bound(raw: bytes, limit: int) -> int:
    """An upper bound on the values (keys included) that decoding the JSON text ``raw`` makes,
    exact enough to compare with ``limit``; linear in bytes at C speed, never per value.

    Every value but the first follows a ``,``, ``:``, ``[`` or ``{`` outside a string, so
    one plus their count bounds the values. Counted first over the whole text; only when
    that passes ``limit`` are strings taken out (their quotes alone then bound the values,
    so splitting at them costs at most ``2 * limit`` pieces).
    """
    bound = 1 + _separators(raw)
    if bound <= limit:
        return bound
    text = _unescaped(raw)
    strings = text.count(b'"') // 2
    if strings > limit:
        return strings
    outside = b"".join(text.split(b'"')[::2])
    return 1 + _separators(outside)


#: A JSON text's brackets as steps of nesting (+1 in, -1 out: 0xFF read as a signed byte);
#: every other byte deleted.
_STEPS = bytes.maketrans(b"[{]}", b"\x01\x01\xff\xff")
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")


def _unescaped(raw: bytes) -> bytes:
    """The JSON text ``raw`` without its escaped backslashes and quotes: a ``"`` left is a
    string's start or end."""
    return raw.replace(b"\\\\", b"").replace(b'\\"', b"") if b"\\" in raw else raw


def _outside_strings(raw: bytes) -> bytes:
    """The JSON text ``raw`` with its strings taken out."""
    text = _unescaped(raw)
    return b"".join(text.split(b'"')[::2]) if b'"' in text else text


def nests_deeper_than(raw: bytes, limit: int) -> bool:
    """True if the JSON text ``raw`` nests arrays and objects more than ``limit`` deep.

    For a value decoded by msgspec (which refuses what else ``json_problem`` looks for: NaN,
    numbers out of range, integers past 4300 digits), this is the one check left, and it
    runs at C speed over the bytes, never per value in Python: a text with ``limit``
    openings or fewer costs two counts; else the running sum of its brackets' steps.
    """
    if raw.count(b"[") + raw.count(b"{") <= limit:
        return False
    steps = array.array("b", _outside_strings(raw).translate(_STEPS, _NOT_BRACKETS))
    return max(itertools.accumulate(steps), default=0) > limit
