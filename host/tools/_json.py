"""Iterative JSON helpers: freeze, thaw and canonical text, safe at any nesting depth."""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable
from typing import Any, Final, NoReturn, SupportsIndex

__all__ = ("FrozenDict", "FrozenList", "canonical_json", "freeze", "thaw")


def _read_only(*_args: object, **_kwargs: object) -> NoReturn:
    raise TypeError("frozen tool values are read-only")


class FrozenDict(dict[str, Any]):
    """A read-only ``dict``: a frozen JSON object inside a tool result."""

    __slots__ = ()
    __setitem__ = __delitem__ = _read_only
    clear = pop = popitem = setdefault = update = _read_only

    def __ior__(self, other: object) -> NoReturn:  # type: ignore[misc]
        _read_only()

    def __reduce__(self) -> tuple[type[dict[str, Any]], tuple[dict[str, Any]]]:
        return (dict, (dict(self),))


class FrozenList(list[Any]):
    """A read-only ``list``: a frozen JSON array inside a tool result."""

    __slots__ = ()
    __setitem__ = __delitem__ = _read_only
    append = extend = insert = pop = remove = reverse = sort = clear = _read_only

    def __iadd__(self, other: Iterable[Any]) -> NoReturn:  # type: ignore[misc]
        _read_only()

    def __imul__(self, other: SupportsIndex) -> NoReturn:
        _read_only()

    def __reduce__(self) -> tuple[type[list[Any]], tuple[list[Any]]]:
        return (list, (list(self),))


_LEAVES: Final = frozenset({str, int, float, bool, type(None)})
_PLAIN: Final = frozenset({dict, list, FrozenDict, FrozenList})


def _is_flat(value: dict[str, Any] | list[Any]) -> bool:
    """True for a plain or frozen container whose children are all JSON scalars."""
    if type(value) not in _PLAIN:  # a subclass may iterate its own way: take the general path
        return False
    children = value.values() if isinstance(value, dict) else value
    return all(type(child) in _LEAVES for child in children)


def _copy_tree(value: Any, dict_type: type[dict[str, Any]], list_type: type[list[Any]]) -> Any:
    """Deep-copy dicts and lists into the given container types, without recursion.

    Everything else (tuples included) is kept as it is: validation rejects what is not JSON.
    """
    if not isinstance(value, dict | list):
        return value
    if _is_flat(value):  # no container inside: one shallow copy is the whole deep copy
        return dict_type(value) if isinstance(value, dict) else list_type(value)
    memo: dict[int, Any] = {}

    def new(src: Any) -> Any:
        dst = dict_type() if isinstance(src, dict) else list_type()
        memo[id(src)] = dst
        return dst

    root = new(value)
    stack: list[tuple[Any, Any]] = [(value, root)]
    while stack:
        src, dst = stack.pop()
        items = src.items() if isinstance(src, dict) else enumerate(src)
        for key, child in items:
            if isinstance(child, dict | list):
                copied = memo.get(id(child))
                if copied is None:
                    copied = new(child)
                    stack.append((child, copied))
            else:
                copied = child
            if isinstance(src, dict):
                dict.__setitem__(dst, key, copied)
            else:
                list.append(dst, copied)
    return root


def freeze(value: Any) -> Any:
    """Return a deep, read-only copy of a JSON-like value (dicts and lists become frozen)."""
    if type(value) in _KEPT:  # already frozen, or a leaf ``_copy_tree`` would return as it is
        return value
    return _copy_tree(value, FrozenDict, FrozenList)


_KEPT: Final = _LEAVES | {FrozenDict, FrozenList}


def thaw(value: Any) -> Any:
    """Return a deep copy of a (possibly frozen) JSON-like value made of plain dicts and lists."""
    return _copy_tree(value, dict, list)


_ENTER, _EXIT, _TEXT = 0, 1, 2

# What ``json.dumps`` would build per call; an encoder keeps no state between ``encode`` calls.
_ENCODERS: Final = {
    sort_keys: json.JSONEncoder(
        sort_keys=sort_keys, separators=(",", ":"), ensure_ascii=False, allow_nan=True
    )
    for sort_keys in (False, True)
}


def _float_text(value: float) -> str:
    """A float as the encoder writes it (``NaN`` and ``Infinity`` included)."""
    return float.__repr__(value) if math.isfinite(value) else _ENCODERS[True].encode(value)


_SCALARS: Final[dict[type, Callable[[Any], str]]] = {
    type(None): lambda _value: "null",
    bool: lambda value: "true" if value else "false",
    int: int.__repr__,  # the C encoder's own choice (it raises the same ValueError for huge ints)
    float: _float_text,
}


def canonical_json(value: Any, *, sort_keys: bool = True) -> str:
    """Return compact JSON text (keys sorted by default); a cycle prints as ``"<cycle>"``."""
    try:  # the C encoder is exact for plain JSON; deep, cyclic or odd values take the slow path
        scalar = _SCALARS.get(type(value))
        if scalar is not None:  # what the encoder writes for these, without building one
            return scalar(value)
        return _ENCODERS[bool(sort_keys)].encode(value)
    except (RecursionError, TypeError, ValueError):
        return _canonical_slow(value, sort_keys)


def _canonical_slow(value: Any, sort_keys: bool) -> str:
    """The iterative encoder behind ``canonical_json``: any depth, cycles, non-JSON leaves."""
    out: list[str] = []
    on_path: set[int] = set()
    stack: list[tuple[int, Any]] = [(_ENTER, value)]
    while stack:
        op, item = stack.pop()
        if op == _TEXT:
            out.append(item)
            continue
        if op == _EXIT:
            on_path.discard(item)
            continue
        if isinstance(item, dict | list | tuple):
            if id(item) in on_path:
                out.append('"<cycle>"')
                continue
            on_path.add(id(item))
            stack.append((_EXIT, id(item)))
            if isinstance(item, dict):
                keys = sorted(item, key=str) if sort_keys else list(item)
                stack.append((_TEXT, "}"))
                for index in range(len(keys) - 1, -1, -1):
                    key = keys[index]
                    stack.append((_ENTER, item[key]))
                    sep = "," if index else ""
                    stack.append((_TEXT, sep + json.dumps(str(key), ensure_ascii=False) + ":"))
                out.append("{")
            else:
                stack.append((_TEXT, "]"))
                for index in range(len(item) - 1, -1, -1):
                    stack.append((_ENTER, item[index]))
                    if index:
                        stack.append((_TEXT, ","))
                out.append("[")
        elif item is None or isinstance(item, bool | int | float | str):
            out.append(json.dumps(item, ensure_ascii=False))
        else:
            out.append(json.dumps(repr(item), ensure_ascii=False))
    return "".join(out)
