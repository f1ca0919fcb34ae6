"""Type hints as schema nodes, and JSON arguments as the Python values the hints name.

Plain hints become DSL nodes; dataclasses, ``TypedDict``s and ``Enum``s become named
(titled) nodes, and recursive ones a bare JSON Schema with ``$defs``; a pydantic model is
its own ``model_json_schema()``. pydantic is used when it is loaded, never imported here.
"""

from __future__ import annotations

import dataclasses
import datetime
import enum
import inspect
import sys
import types
import typing
import uuid
from collections.abc import Callable
from typing import Any, Literal, NotRequired, Required, get_args, get_origin

import msgspec

from ._exceptions import SchemaError
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
    schema,
    to_json_schema,
)
from ._view import from_json_schema

__all__ = ("dump_value", "hint_converter", "hint_to_node", "needs_dump")

_FORMATS: dict[Any, str] = {
    datetime.datetime: "date-time",
    datetime.date: "date",
    datetime.time: "time",
    uuid.UUID: "uuid",
}
_REF = "\x00$ref:"  # marks a recursive reference while a JSON Schema is being built


def _pydantic_model(hint: Any) -> bool:
    """True for a pydantic ``BaseModel`` subclass (pydantic is only looked at if loaded)."""
    module = sys.modules.get("pydantic")
    base = getattr(module, "BaseModel", None)
    return base is not None and isinstance(hint, type) and issubclass(hint, base)


def _strip(hint: Any) -> Any:
    while get_origin(hint) in (typing.Annotated, Required, NotRequired):
        hint = get_args(hint)[0]
    return hint


def _is_named(hint: Any) -> bool:
    return isinstance(hint, type) and (dataclasses.is_dataclass(hint) or typing.is_typeddict(hint))


class _Translator:
    """One translation: named types met so far, and which of them recur."""

    def __init__(self) -> None:
        self.stack: list[Any] = []
        self.recursive: set[Any] = set()
        self.defs: dict[str, Node] = {}
        self.names: dict[Any, str] = {}

    def name_of(self, hint: Any) -> str:
        if hint not in self.names:
            base, n = hint.__name__, 2
            candidate = base
            while candidate in self.names.values():
                candidate, n = f"{base}_{n}", n + 1
            self.names[hint] = candidate
        return self.names[hint]

    def node(self, hint: Any) -> Node:
        origin = get_origin(hint)
        if origin is typing.Annotated:
            base, *metadata = get_args(hint)
            return _apply_meta(self.node(base), tuple(metadata))
        if origin in (Required, NotRequired):
            return self.node(get_args(hint)[0])
        simple: dict[Any, Callable[[], Node]] = {
            str: String,
            int: Integer,
            float: Number,
            bool: Boolean,
            None: Null,
            type(None): Null,
            Any: Json,
            object: Json,
            list: Array,
            dict: lambda: schema.object({}, additional_properties=True),
        }
        if hint in simple:
            return simple[hint]()
        if hint in _FORMATS:
            return String(format=_FORMATS[hint])
        if origin is Literal:
            return _literal(get_args(hint))
        if origin in (types.UnionType, typing.Union):
            members = list(get_args(hint))
            if int in members and float in members:
                members.remove(int)
            nodes = tuple(self.node(member) for member in members)
            return nodes[0] if len(nodes) == 1 else OneOf(options=nodes)
        if origin is list:
            (item,) = get_args(hint)
            return Array(items=self.node(item))
        if origin is dict:
            key, value = get_args(hint)
            if key is not str:
                raise SchemaError(f"dict keys must be str, got {key!r}")
            return schema.object({}, additional_properties=self.node(value))
        if isinstance(hint, type) and issubclass(hint, enum.Enum):
            return _enum(hint)
        if _pydantic_model(hint):
            return from_json_schema(hint.model_json_schema())
        if _is_named(hint):
            return self._named(hint)
        raise SchemaError(f"unsupported type hint {hint!r}")

    def _named(self, hint: Any) -> Node:
        name = self.name_of(hint)
        if hint in self.stack:
            self.recursive.add(hint)
            return Json(description=_REF + name)
        self.stack.append(hint)
        try:
            node = _typed_dict(self, hint) if typing.is_typeddict(hint) else _dataclass(self, hint)
        finally:
            self.stack.pop()
        if hint in self.recursive:
            self.defs[name] = node
            return Json(description=_REF + name)
        return node

    def finish(self, node: Node) -> Node:
        """The node, or a bare JSON Schema with ``$defs`` when a recursive type was met."""
        if not self.defs:
            return node
        doc = _refs(to_json_schema(node))
        doc["$defs"] = {name: _refs(to_json_schema(self.defs[name])) for name in sorted(self.defs)}
        return from_json_schema(doc)


def _refs(doc: Any) -> Any:
    """Turn the recursion markers of a freshly emitted document into ``$ref``s."""
    stack = [doc]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            for key, value in list(item.items()):
                if isinstance(value, dict) and str(value.get("description", "")).startswith(_REF):
                    item[key] = {"$ref": "#/$defs/" + value["description"][len(_REF) :]}
                else:
                    stack.append(value)
        elif isinstance(item, list):
            for index, value in enumerate(item):
                if isinstance(value, dict) and str(value.get("description", "")).startswith(_REF):
                    item[index] = {"$ref": "#/$defs/" + value["description"][len(_REF) :]}
                else:
                    stack.append(value)
    if isinstance(doc, dict) and str(doc.get("description", "")).startswith(_REF):
        return {"$ref": "#/$defs/" + doc["description"][len(_REF) :]}
    return doc


def hint_to_node(hint: Any) -> Node:
    """Translate a type hint into a schema node (raises ``SchemaError`` when unsupported)."""
    translator = _Translator()
    return translator.finish(translator.node(hint))


def _doc_summary(hint: Any) -> str | None:
    own = vars(hint).get("__doc__")
    if not isinstance(own, str) or own.startswith(hint.__name__ + "("):
        return None  # no docstring of its own (a dataclass's generated one is its signature)
    return inspect.cleandoc(own).split("\n\n", 1)[0].strip() or None


def _typed_dict(translator: _Translator, hint: Any) -> Object:
    hints = typing.get_type_hints(hint, include_extras=True)
    required_keys = hint.__required_keys__
    props: dict[str, Node] = {}
    for key, sub in hints.items():
        node = translator.node(sub)
        # With postponed annotations, __required_keys__ misses NotRequired[...]: use the hint.
        wrapper = get_origin(_strip_annotated(sub))
        needed = wrapper is Required or (wrapper is not NotRequired and key in required_keys)
        props[key] = dataclasses.replace(node, required=needed)
    out = schema.object(props, additional_properties=False, description=_doc_summary(hint))
    return dataclasses.replace(out, title=translator.name_of(hint))


def _dataclass(translator: _Translator, hint: Any) -> Object:
    hints = typing.get_type_hints(hint, include_extras=True)
    props: dict[str, Node] = {}
    for item in dataclasses.fields(hint):
        if not item.init:
            continue
        node = translator.node(hints.get(item.name, Any))
        has_default = (
            item.default is not dataclasses.MISSING
            or item.default_factory is not dataclasses.MISSING
        )
        changes: dict[str, Any] = {"required": not has_default}
        if item.default is not dataclasses.MISSING:
            changes["default"] = _json_default(item.default)
        props[item.name] = dataclasses.replace(node, **changes)
    out = schema.object(props, additional_properties=False, description=_doc_summary(hint))
    return dataclasses.replace(out, title=translator.name_of(hint))


def _strip_annotated(hint: Any) -> Any:
    while get_origin(hint) is typing.Annotated:
        hint = get_args(hint)[0]
    return hint


def _json_default(value: Any) -> Any:
    if isinstance(value, enum.Enum):
        value = value.value
    if value is None or isinstance(value, bool | int | float | str):
        return value
    return MISSING


def _enum(hint: type[enum.Enum]) -> Node:
    values = [member.value for member in hint]
    node = _literal(tuple(values))
    changes: dict[str, Any] = {"title": hint.__name__}
    summary = _doc_summary(hint)
    if summary:
        changes["description"] = summary
    return dataclasses.replace(node, **changes)


def _literal(values: tuple[Any, ...]) -> Node:
    groups: dict[type[Node], list[Any]] = {}
    for value in values:
        if value is None:
            groups.setdefault(Null, []).append(value)
        elif isinstance(value, bool):
            groups.setdefault(Boolean, []).append(value)
        elif isinstance(value, int):
            groups.setdefault(Integer, []).append(value)
        elif isinstance(value, str):
            groups.setdefault(String, []).append(value)
        else:
            raise SchemaError(f"Literal values must be str, int, bool or None, got {value!r}")
    nodes: list[Node] = []
    for kind, items in groups.items():
        if kind is Null:
            nodes.append(Null())
        elif len(items) == 1:
            nodes.append(kind(const=items[0]))  # type: ignore[call-arg]
        else:
            nodes.append(kind(enum=tuple(items)))  # type: ignore[call-arg]
    return nodes[0] if len(nodes) == 1 else OneOf(options=tuple(nodes))


_BOUNDS = {"ge": "minimum", "le": "maximum", "gt": "exclusive_minimum", "lt": "exclusive_maximum"}


def _constraints(meta: Any) -> list[Any]:
    """``annotated-types`` and pydantic ``Field`` metadata, flattened to single constraints."""
    if getattr(meta, "__is_annotated_types_grouped_metadata__", False):
        return [item for part in meta for item in _constraints(part)]
    if type(meta).__name__ == "FieldInfo" and type(meta).__module__.startswith("pydantic"):
        return [meta, *(item for part in meta.metadata for item in _constraints(part))]
    return [meta]


def _apply_meta(node: Node, metadata: tuple[Any, ...]) -> Node:
    changes: dict[str, Any] = {}
    for meta in (item for raw in metadata for item in _constraints(raw)):
        if isinstance(meta, str):
            changes["description"] = meta
            continue
        if isinstance(meta, msgspec.Meta) or type(meta).__name__ == "FieldInfo":
            for key in ("description", "title"):
                if getattr(meta, key, None) is not None:
                    changes[key] = getattr(meta, key)
        for key, target in _BOUNDS.items():
            if getattr(meta, key, None) is not None:
                if not isinstance(node, Number | Integer):
                    raise SchemaError(f"{key} applies to numbers, not {type(node).__name__}")
                changes[target] = getattr(meta, key)
        if getattr(meta, "multiple_of", None) is not None:
            if not isinstance(node, Number | Integer):
                raise SchemaError("multiple_of applies to numbers")
            changes["multiple_of"] = meta.multiple_of
        for key in ("min_length", "max_length"):
            if getattr(meta, key, None) is not None:
                if isinstance(node, String):
                    changes[key] = getattr(meta, key)
                elif isinstance(node, Array):
                    changes[key.replace("length", "items")] = getattr(meta, key)
                else:
                    raise SchemaError(f"{key} applies to strings and arrays")
        if getattr(meta, "pattern", None) is not None:
            if not isinstance(node, String):
                raise SchemaError("pattern applies to strings")
            changes["pattern"] = meta.pattern
    if not changes:
        return node
    if node.bare is not None:  # a pydantic model: only its docs can change here
        changes = {k: v for k, v in changes.items() if k in ("description", "title")}
    return dataclasses.replace(node, **changes)


Converter = Callable[[Any], Any]


def hint_converter(
    hint: Any, _cache: dict[Any, Converter | None] | None = None
) -> Converter | None:
    """What turns a valid JSON argument into the value ``hint`` names (None: as it is)."""
    cache: dict[Any, Converter | None] = {} if _cache is None else _cache
    hint = _strip(hint)
    try:
        if hint in cache:
            return cache[hint]
    except TypeError:  # an unhashable hint: no conversion
        return None
    if _pydantic_model(hint):
        return hint.model_validate  # type: ignore[no-any-return]
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        return hint
    if hint in (datetime.datetime, datetime.date, datetime.time):
        return hint.fromisoformat  # type: ignore[no-any-return]
    if hint is uuid.UUID:
        return uuid.UUID
    origin = get_origin(hint)
    if origin is list:
        item = hint_converter(get_args(hint)[0], cache)
        return None if item is None else (lambda value: [item(v) for v in value])
    if origin is dict:
        inner = hint_converter(get_args(hint)[1], cache)
        return None if inner is None else (lambda value: {k: inner(v) for k, v in value.items()})
    if origin in (types.UnionType, typing.Union):
        return _union_converter(get_args(hint), cache)
    if _is_named(hint):
        return _named_converter(hint, cache)
    return None


def _named_converter(hint: Any, cache: dict[Any, Converter | None]) -> Converter | None:
    fields: dict[str, Converter] = {}
    holder: list[Converter] = []

    def late(value: Any) -> Any:  # a recursive use resolves once the converter is built
        return holder[0](value)

    cache[hint] = late
    hints = typing.get_type_hints(hint)
    for key, sub in hints.items():
        found = hint_converter(sub, cache)
        if found is not None:
            fields[key] = found
    is_dict = typing.is_typeddict(hint)

    def convert(value: Any) -> Any:
        items = {k: fields[k](v) if k in fields else v for k, v in value.items()}
        return items if is_dict else hint(**items)

    if is_dict and not fields:
        cache[hint] = None
        return None
    holder.append(convert)
    cache[hint] = convert
    return convert


def _union_converter(
    members: tuple[Any, ...], cache: dict[Any, Converter | None]
) -> Converter | None:
    found = [(m, hint_converter(m, cache)) for m in members if m is not type(None)]
    if all(convert is None for _, convert in found):
        return None
    plain = tuple(m for m, convert in found if convert is None and isinstance(m, type))

    def convert(value: Any) -> Any:
        if value is None or (plain and isinstance(value, plain)):
            return value
        for _member, each in found:
            if each is None:
                continue
            try:
                return each(value)
            except (TypeError, ValueError, KeyError):  # pydantic's errors are ValueErrors
                continue
        return value

    return convert


def needs_dump(hint: Any, _seen: frozenset[int] = frozenset()) -> bool:
    """True when a value of ``hint`` may hold Python objects that are not JSON."""
    hint = _strip(hint)
    if id(hint) in _seen:
        return False
    if _pydantic_model(hint) or hint in _FORMATS or _is_named(hint):
        return True
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        return True
    return any(needs_dump(arg, _seen | {id(hint)}) for arg in get_args(hint))


def dump_value(value: Any) -> Any:
    """A returned value as JSON: models, dataclasses, enums, dates and UUIDs turned into it."""
    if value is None or (
        isinstance(value, bool | int | float | str) and not isinstance(value, enum.Enum)
    ):
        return value
    if isinstance(value, enum.Enum):
        return dump_value(value.value)
    if isinstance(value, datetime.date | datetime.time):
        return value.isoformat()
    if isinstance(value, uuid.UUID):
        return str(value)
    if _pydantic_model(type(value)):
        return value.model_dump(mode="json")
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: dump_value(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, dict):
        return {k: dump_value(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [dump_value(v) for v in value]
    return value
