"""The validator: walks a node and a value with an explicit work stack, never recursing."""

from __future__ import annotations

import datetime
import json
import math
import re
import uuid
from collections.abc import Callable
from functools import lru_cache
from typing import Any, Final

import jsonschema_rs

from ._explain import describe as _describe
from ._schema import (
    MISSING,
    Array,
    Boolean,
    Integer,
    Json,
    Node,
    Null,
    Number,
    Object,
    OneOf,
    String,
    to_json_schema,
)

__all__ = ("format_path", "validate")

_Path = tuple[Any, Any] | None  # (parent path, key) or None for the root
_IDENT: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_CHECK, _EXIT, _RESOLVE = 0, 1, 2


class _Branch:
    """One alternative of a ``oneOf`` (or the root): the first error found inside it."""

    __slots__ = ("error", "parent")

    def __init__(self, parent: _Branch | None) -> None:
        self.parent = parent
        self.error: str | None = None

    def dead(self) -> bool:
        branch: _Branch | None = self
        while branch is not None:
            if branch.error is not None:
                return True
            branch = branch.parent
        return False


def format_path(path: _Path) -> str:
    """Render a linked path as ``$.items[3]["odd key"]``."""
    parts: list[str] = []
    while path is not None:
        path, key = path
        if isinstance(key, int):
            parts.append(f"[{key}]")
        elif _IDENT.match(key):
            parts.append(f".{key}")
        else:
            parts.append(f"[{json.dumps(key, ensure_ascii=False)}]")
    return "$" + "".join(reversed(parts))


@lru_cache(maxsize=256)
def _regex(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern)


def _expected(node: Node) -> str:
    if isinstance(node, OneOf):
        return "exactly one of (" + " | ".join(_expected(option) for option in node.options) + ")"
    if isinstance(node, Json):
        return "a JSON value"
    return type(node).__name__.lower()


def _date_time(text: str) -> object:
    if len(text) < 11 or text[10] not in "Tt ":
        raise ValueError("no time")
    return datetime.datetime.fromisoformat(text)


# The formats ``@tool`` turns into Python objects: a value that passes must convert.
_FORMATS: Final[dict[str, Callable[[str], object]]] = {
    "date-time": _date_time,
    "date": datetime.date.fromisoformat,
    "time": datetime.time.fromisoformat,
    "uuid": uuid.UUID,
}


def _parses(check: Callable[[str], object], text: str) -> bool:
    try:
        check(text)
    except ValueError:
        return False
    return True


def _multiple(value: float, step: float) -> bool:
    """JSON Schema's ``multipleOf``, as the reference validator computes it."""
    if isinstance(step, float) or isinstance(value, float):
        quotient = value / step
        return math.isfinite(quotient) and int(quotient) == quotient
    return value % step == 0


def _json_equal(left: Any, right: Any) -> bool:
    if isinstance(left, bool) or isinstance(right, bool):
        return left is right
    return bool(left == right)


def _check_scalar(node: Node, value: Any) -> str | None:
    """Check a non-container node against a value; return what was expected, or None."""
    if isinstance(node, String):
        if not isinstance(value, str):
            return "string"
        if node.min_length is not None and len(value) < node.min_length:
            return f"string of at least {node.min_length} characters"
        if node.max_length is not None and len(value) > node.max_length:
            return f"string of at most {node.max_length} characters"
        if node.pattern is not None and not _regex(node.pattern).search(value):
            return f"string matching /{node.pattern}/"
        check = None if node.format is None else _FORMATS.get(node.format)
        if check is not None and not _parses(check, value):
            return f"string in format {node.format}"
    elif isinstance(node, Number | Integer):
        if isinstance(value, bool) or not isinstance(value, int | float):
            return _expected(node)
        if isinstance(node, Integer) and not isinstance(value, int):
            return "integer"
        if isinstance(value, float) and not math.isfinite(value):
            return "finite number"
        if node.minimum is not None and value < node.minimum:
            return f"{_expected(node)} >= {node.minimum}"
        if node.maximum is not None and value > node.maximum:
            return f"{_expected(node)} <= {node.maximum}"
        if node.exclusive_minimum is not None and value <= node.exclusive_minimum:
            return f"{_expected(node)} > {node.exclusive_minimum}"
        if node.exclusive_maximum is not None and value >= node.exclusive_maximum:
            return f"{_expected(node)} < {node.exclusive_maximum}"
        if node.multiple_of is not None and not _multiple(value, node.multiple_of):
            return f"multiple of {node.multiple_of}"
    elif isinstance(node, Boolean):
        if not isinstance(value, bool):
            return "boolean"
    elif isinstance(node, Null):
        if value is not None:
            return "null"
    else:  # Json leaves
        if value is None or isinstance(value, bool | int | str):
            return None
        if isinstance(value, float):
            return None if math.isfinite(value) else "finite number"
        return "a JSON value"
    if isinstance(node, String | Number | Integer | Boolean):
        if node.enum is not None and not any(_json_equal(value, item) for item in node.enum):
            return "one of " + json.dumps(list(node.enum))
        if node.const is not MISSING and not _json_equal(value, node.const):
            return json.dumps(node.const)
    return None


def validate(node: Node, value: Any) -> str | None:
    """Validate ``value`` against ``node``; return the first error message, or None if valid.

    Uses memory proportional to the value's size, never the Python call stack. A node made
    from a bare JSON Schema validates with that schema's compiled, bounded validator.
    """
    if node.bare is not None:
        return node.bare.check(value)
    if _is_leaf(node, value):  # fast path: one leaf
        expected = _check_scalar(node, value)
        return None if expected is None else _fail(None, expected, value)
    compiled = _compiled(node)
    # The compiled schema only ever says "valid", and only for values on which the DSL and
    # JSON Schema agree; anything else (and every error message) comes from the walk.
    if compiled is not None and _plain(value) and _valid(compiled, value):
        return None
    if isinstance(node, Object) and _flat_object_valid(node, value):
        return None
    return _walk(node, value)


_COMPILED: dict[int, tuple[Node, Any]] = {}  # id -> (the node, kept alive; its validator)
_MAX_COMPILED: Final = 4096
_MAX_COMPILED_DEPTH: Final = 32
_SAFE_INT: Final = 2**53


def _compiled(node: Node) -> Any:
    """The node's JSON Schema compiled by jsonschema-rs, when it means the same as the DSL."""
    entry = _COMPILED.get(id(node))
    if entry is not None and entry[0] is node:
        return entry[1]
    validator = _compile(node)
    if len(_COMPILED) >= _MAX_COMPILED:
        _COMPILED.clear()
    _COMPILED[id(node)] = (node, validator)
    return validator


def _compile(node: Node) -> Any:
    stack: list[tuple[Node, int]] = [(node, 0)]
    while stack:
        current, depth = stack.pop()
        if depth > _MAX_COMPILED_DEPTH or current.bare is not None:
            return None
        if isinstance(current, String) and (current.pattern or current.format):
            return None  # Python's regex dialect and checked formats: the walk decides
        if isinstance(current, Array) and current.items is not None:
            stack.append((current.items, depth + 1))
        elif isinstance(current, Object):
            stack.extend((child, depth + 1) for _, child in current.properties)
            if isinstance(current.additional_properties, Node):
                stack.append((current.additional_properties, depth + 1))
        elif isinstance(current, OneOf):
            stack.extend((option, depth + 1) for option in current.options)
    try:
        return jsonschema_rs.Draft202012Validator(
            to_json_schema(node), validate_formats=False, offline=True
        )
    except (ValueError, jsonschema_rs.ReferencingError):  # pragma: no cover - DSL emits valid
        return None


def _valid(compiled: Any, value: Any) -> bool:
    try:
        return bool(compiled.is_valid(value))
    except (ValueError, UnicodeError, OverflowError):  # a lone surrogate: the walk decides
        return False


def _plain(value: Any) -> bool:
    """True for exact JSON types on which JSON Schema and the DSL agree (no 1.0 integers)."""
    if type(value) is dict:
        for key, child in value.items():
            kind = type(child)
            if type(key) is not str:
                return False
            if kind is str or kind is bool or child is None:
                continue
            if kind is int and -_SAFE_INT < child < _SAFE_INT:
                continue
            break
        else:
            return True
    stack: list[tuple[Any, int]] = [(value, 0)]
    seen = 0
    while stack:
        item, depth = stack.pop()
        kind = type(item)
        if kind is str or kind is bool or item is None:
            continue
        if kind is int:
            if not -_SAFE_INT < item < _SAFE_INT:
                return False
            continue
        if kind is float:
            if not math.isfinite(item) or item.is_integer():
                return False
            continue
        if depth > 64 or seen > 10_000:
            return False  # deep or large: the walk (no recursion, no cycle) takes it
        seen += 1
        if kind is dict:
            for key, child in item.items():
                if type(key) is not str:
                    return False
                stack.append((child, depth + 1))
        elif kind is list:
            stack.extend((child, depth + 1) for child in item)
        else:
            return False
    return True


def _is_leaf(node: Node, value: Any) -> bool:
    """True when ``_visit`` would only run ``_check_scalar`` on this pair (no children)."""
    if node.bare is not None:
        return False
    if isinstance(node, String | Number | Integer | Boolean | Null):
        return True
    return isinstance(node, Json) and not isinstance(value, dict | list)


def _flat_object_valid(node: Object, value: Any) -> bool:
    """True when ``value`` is an object whose every property is a valid leaf (common tool args)."""
    # False means "not known": the full walk then finds the first error. The checks run in the
    # walk's own order, so whatever they raise, the walk would raise at the same point.
    if not isinstance(value, dict):
        return False
    for key in value:
        if not isinstance(key, str):
            return False
    for key, _ in node.properties:
        if key in node.required_names and key not in value:
            return False
    extra, props = node.additional_properties, node.property_map
    pairs: list[tuple[Node, Any]] = []
    for key, item in value.items():
        child = props.get(key)
        if child is None:
            if extra is False:
                return False
            child = _ANY if extra is True else extra
        pairs.append((child, item))
    for child, item in pairs:
        if not _is_leaf(child, item) or _check_scalar(child, item) is not None:
            return False
    return True


def _walk(node: Node, value: Any) -> str | None:
    """The general validator: an explicit work stack over containers and ``oneOf`` branches."""
    root = _Branch(None)
    on_path: set[int] = set()
    stack: list[tuple[Any, ...]] = [(_CHECK, node, value, None, root)]
    while stack:
        task = stack.pop()
        op = task[0]
        if op == _EXIT:
            on_path.discard(task[1])
            continue
        if op == _RESOLVE:
            _, union, _value, path, branch, alternatives = task
            if branch.dead():
                continue
            matched = sum(1 for alt in alternatives if alt.error is None)
            if matched != 1:
                got = "none matched" if matched == 0 else f"{matched} matched"
                message = f"{format_path(path)}: expected {_expected(union)}, {got}"
                branch.error = message
                if branch is root:
                    return message
            continue
        _, current, item, path, branch = task
        if branch.dead():
            continue
        error = _visit(current, item, path, branch, stack, on_path)
        if error is not None:
            branch.error = error
            if branch is root:
                return error
    return None


def _visit(
    node: Node,
    value: Any,
    path: _Path,
    branch: _Branch,
    stack: list[tuple[Any, ...]],
    on_path: set[int],
) -> str | None:
    """Check one (node, value) pair and push its children; return an error message or None."""
    if node.bare is not None:
        return node.bare.check(value, _parts(path))
    if isinstance(node, OneOf):
        alternatives = [_Branch(branch) for _ in node.options]
        stack.append((_RESOLVE, node, value, path, branch, alternatives))
        for option, alternative in zip(node.options, alternatives, strict=True):
            stack.append((_CHECK, option, value, path, alternative))
        return None
    is_dict, is_list = isinstance(value, dict), isinstance(value, list)
    if isinstance(node, Array | Object) or (isinstance(node, Json) and (is_dict or is_list)):
        if isinstance(node, Array) and not is_list:
            return _fail(path, "array", value)
        if isinstance(node, Object) and not is_dict:
            return _fail(path, "object", value)
        if id(value) in on_path:
            return f"{format_path(path)}: expected a JSON value, got a reference cycle"
        on_path.add(id(value))
        stack.append((_EXIT, id(value)))
        if is_list:
            return _push_list(node, value, path, branch, stack)
        return _push_dict(node, value, path, branch, stack)
    expected = _check_scalar(node, value)
    return None if expected is None else _fail(path, expected, value)


def _parts(path: _Path) -> tuple[Any, ...]:
    parts: list[Any] = []
    while path is not None:
        path, key = path
        parts.append(key)
    return tuple(reversed(parts))


def _fail(path: _Path, expected: str, value: Any) -> str:
    return f"{format_path(path)}: expected {expected}, got {_describe(value)}"


_ANY: Final = Json()


def _push_list(
    node: Node, value: list[Any], path: _Path, branch: _Branch, stack: list[tuple[Any, ...]]
) -> str | None:
    items: Node = _ANY
    if isinstance(node, Array):
        if node.min_items is not None and len(value) < node.min_items:
            return _fail(path, f"array of at least {node.min_items} items", value)
        if node.max_items is not None and len(value) > node.max_items:
            return _fail(path, f"array of at most {node.max_items} items", value)
        items = node.items or _ANY
    for index in range(len(value) - 1, -1, -1):
        stack.append((_CHECK, items, value[index], (path, index), branch))
    return None


def _push_dict(
    node: Node, value: dict[Any, Any], path: _Path, branch: _Branch, stack: list[tuple[Any, ...]]
) -> str | None:
    for key in value:
        if not isinstance(key, str):
            return f"{format_path(path)}: expected an object with string keys, got key {key!r}"
    if not isinstance(node, Object):
        for key in reversed(list(value)):
            stack.append((_CHECK, _ANY, value[key], (path, key), branch))
        return None
    for key, _ in node.properties:
        if key in node.required_names and key not in value:
            return f"{format_path((path, key))}: missing required property"
    extra = node.additional_properties
    props = node.property_map
    pending: list[tuple[Any, ...]] = []
    for key, item in value.items():
        child = props.get(key)
        if child is None:
            if extra is False:
                return f"{format_path((path, key))}: unexpected property (not allowed here)"
            child = _ANY if extra is True else extra
        pending.append((_CHECK, child, item, (path, key), branch))
    pending.reverse()
    stack.extend(pending)
    return None
