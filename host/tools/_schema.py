"""The schema model: a closed family of nodes, the explicit DSL, and JSON Schema out."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from ._exceptions import SchemaError
from ._jsonschema import BareSchema

__all__ = (
    "MISSING",
    "Array",
    "Boolean",
    "Integer",
    "Json",
    "Node",
    "Null",
    "Number",
    "Object",
    "OneOf",
    "SchemaDSL",
    "String",
    "schema",
    "to_json_schema",
)


class _Missing:
    __slots__ = ()

    def __repr__(self) -> str:
        return "MISSING"


MISSING: Final[Any] = _Missing()
"""The marker for an absent ``default`` or ``const``."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Node:
    """A schema node; ``required`` only matters for a property of an object.

    ``bare`` is set on a node made from a bare JSON Schema: that schema, kept as given, is
    what validates and what the model reads; the node's fields are a typed view of it.
    """

    description: str | None = None
    default: Any = MISSING
    required: bool = False
    title: str | None = None
    bare: BareSchema | None = field(default=None, repr=False)


@dataclass(frozen=True, slots=True, kw_only=True)
class String(Node):
    """A JSON string, with optional enum/const, length bounds and a regex ``pattern`` (search).

    ``format`` ``date-time``, ``date``, ``time`` and ``uuid`` are checked; others annotate.
    """

    enum: tuple[str, ...] | None = None
    const: Any = MISSING
    min_length: int | None = None
    max_length: int | None = None
    pattern: str | None = None
    format: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Number(Node):
    """A finite JSON number (int or float, never bool), with optional enum/const and bounds."""

    enum: tuple[float, ...] | None = None
    const: Any = MISSING
    minimum: float | None = None
    maximum: float | None = None
    exclusive_minimum: float | None = None
    exclusive_maximum: float | None = None
    multiple_of: float | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Integer(Node):
    """A JSON integer (a Python ``int``, never bool or float), with enum/const and bounds."""

    enum: tuple[int, ...] | None = None
    const: Any = MISSING
    minimum: float | None = None
    maximum: float | None = None
    exclusive_minimum: float | None = None
    exclusive_maximum: float | None = None
    multiple_of: float | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Boolean(Node):
    """A JSON boolean, with optional enum/const."""

    enum: tuple[bool, ...] | None = None
    const: Any = MISSING


@dataclass(frozen=True, slots=True, kw_only=True)
class Null(Node):
    """The JSON null."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Json(Node):
    """Any lossless JSON value (author-only: the model sees an unconstrained schema)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Array(Node):
    """A JSON array whose items all match ``items`` (None: any JSON), with length bounds."""

    items: Node | None = None
    min_items: int | None = None
    max_items: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Object(Node):
    """A JSON object; ``additional_properties`` is True, False or a node for the other keys."""

    properties: tuple[tuple[str, Node], ...] = ()
    required_names: frozenset[str] = frozenset()
    additional_properties: bool | Node = True
    property_map: Mapping[str, Node] = field(default_factory=dict, compare=False, repr=False)

    def __post_init__(self) -> None:
        if not self.property_map and self.properties:
            object.__setattr__(self, "property_map", dict(self.properties))


@dataclass(frozen=True, slots=True, kw_only=True)
class OneOf(Node):
    """A value matching exactly one of ``options``."""

    options: tuple[Node, ...] = ()


def _check_bounds(name: str, *values: float | None) -> None:
    for value in values:
        if value is not None and (isinstance(value, bool) or not math.isfinite(value)):
            raise SchemaError(f"{name}: bounds must be finite numbers, got {value!r}")


def _check_step(name: str, step: float | None) -> None:
    if step is not None and not (_is_number(step) and step > 0):
        raise SchemaError(f"{name}: multiple_of must be a number > 0, got {step!r}")


def _object(
    properties: Mapping[str, Node],
    additional_properties: bool | Node,
    description: str | None,
    required: bool,
    default: Any = MISSING,
) -> Object:
    for key, node in properties.items():
        if not isinstance(key, str) or not isinstance(node, Node):
            raise SchemaError(f"object property {key!r} must map a str to a schema node")
    return Object(
        properties=tuple(properties.items()),
        required_names=frozenset(key for key, node in properties.items() if node.required),
        additional_properties=additional_properties,
        description=description,
        required=required,
        default=default,
    )


class SchemaDSL:
    """The explicit schema DSL used with ``define_tool`` (import it as ``schema``)."""

    __slots__ = ()

    def string(
        self,
        *,
        description: str | None = None,
        required: bool = False,
        enum: Sequence[str] | None = None,
        const: Any = MISSING,
        min_length: int | None = None,
        max_length: int | None = None,
        pattern: str | None = None,
        format: str | None = None,
        default: Any = MISSING,
    ) -> String:
        """A string node; ``format`` ``date-time``, ``date``, ``time`` and ``uuid`` are checked."""
        if pattern is not None:
            try:
                re.compile(pattern)
            except re.error as exc:
                raise SchemaError(f"invalid pattern {pattern!r}: {exc}") from exc
        if enum is not None and not all(isinstance(item, str) for item in enum):
            raise SchemaError("a string enum must list strings")
        if const is not MISSING and not isinstance(const, str):
            raise SchemaError("a string const must be a string")
        return String(
            description=description,
            required=required,
            enum=None if enum is None else tuple(enum),
            const=const,
            min_length=min_length,
            max_length=max_length,
            pattern=pattern,
            format=format,
            default=default,
        )

    def number(
        self,
        *,
        description: str | None = None,
        required: bool = False,
        enum: Sequence[float] | None = None,
        const: Any = MISSING,
        minimum: float | None = None,
        maximum: float | None = None,
        exclusive_minimum: float | None = None,
        exclusive_maximum: float | None = None,
        multiple_of: float | None = None,
        default: Any = MISSING,
    ) -> Number:
        """A number node (ints and finite floats)."""
        _check_bounds("number", minimum, maximum, exclusive_minimum, exclusive_maximum)
        _check_step("number", multiple_of)
        if enum is not None and not all(_is_number(item) for item in enum):
            raise SchemaError("a number enum must list finite numbers")
        if const is not MISSING and not _is_number(const):
            raise SchemaError("a number const must be a finite number")
        return Number(
            description=description,
            required=required,
            enum=None if enum is None else tuple(enum),
            const=const,
            minimum=minimum,
            maximum=maximum,
            exclusive_minimum=exclusive_minimum,
            exclusive_maximum=exclusive_maximum,
            multiple_of=multiple_of,
            default=default,
        )

    def integer(
        self,
        *,
        description: str | None = None,
        required: bool = False,
        enum: Sequence[int] | None = None,
        const: Any = MISSING,
        minimum: float | None = None,
        maximum: float | None = None,
        exclusive_minimum: float | None = None,
        exclusive_maximum: float | None = None,
        multiple_of: float | None = None,
        default: Any = MISSING,
    ) -> Integer:
        """An integer node."""
        _check_bounds("integer", minimum, maximum, exclusive_minimum, exclusive_maximum)
        _check_step("integer", multiple_of)
        if enum is not None and not all(_is_int(item) for item in enum):
            raise SchemaError("an integer enum must list integers")
        if const is not MISSING and not _is_int(const):
            raise SchemaError("an integer const must be an integer")
        return Integer(
            description=description,
            required=required,
            enum=None if enum is None else tuple(enum),
            const=const,
            minimum=minimum,
            maximum=maximum,
            exclusive_minimum=exclusive_minimum,
            exclusive_maximum=exclusive_maximum,
            multiple_of=multiple_of,
            default=default,
        )

    def boolean(
        self,
        *,
        description: str | None = None,
        required: bool = False,
        enum: Sequence[bool] | None = None,
        const: Any = MISSING,
        default: Any = MISSING,
    ) -> Boolean:
        """A boolean node."""
        if enum is not None and not all(isinstance(item, bool) for item in enum):
            raise SchemaError("a boolean enum must list booleans")
        if const is not MISSING and not isinstance(const, bool):
            raise SchemaError("a boolean const must be a boolean")
        return Boolean(
            description=description,
            required=required,
            enum=None if enum is None else tuple(enum),
            const=const,
            default=default,
        )

    def null(self, *, description: str | None = None, required: bool = False) -> Null:
        """A null node."""
        return Null(description=description, required=required)

    def json(self, *, description: str | None = None, required: bool = False) -> Json:
        """Any JSON value (author-only escape hatch)."""
        return Json(description=description, required=required)

    def array(
        self,
        items: Node | None = None,
        *,
        description: str | None = None,
        required: bool = False,
        min_items: int | None = None,
        max_items: int | None = None,
        default: Any = MISSING,
    ) -> Array:
        """An array node; ``items`` None accepts any JSON items."""
        if items is not None and not isinstance(items, Node):
            raise SchemaError("array items must be a schema node")
        return Array(
            items=items,
            description=description,
            required=required,
            min_items=min_items,
            max_items=max_items,
            default=default,
        )

    def object(
        self,
        properties: Mapping[str, Node],
        *,
        additional_properties: bool | Node,
        description: str | None = None,
        required: bool = False,
        default: Any = MISSING,
    ) -> Object:
        """An explicit object node; ``additional_properties`` must always be declared."""
        if not isinstance(additional_properties, bool | Node):
            raise SchemaError("additional_properties must be True, False or a schema node")
        return _object(properties, additional_properties, description, required, default)

    def one_of(
        self, *options: Node, description: str | None = None, required: bool = False
    ) -> OneOf:
        """A node matching exactly one of ``options``."""
        if not options or not all(isinstance(option, Node) for option in options):
            raise SchemaError("one_of needs at least one schema node")
        return OneOf(options=options, description=description, required=required)

    def root(self, properties: Mapping[str, Node]) -> Object:
        """The implicit parameter root: an object of ``properties`` and nothing else (a tool
        that takes other keys says so with ``schema.object(..., additional_properties=...)``)."""
        return _object(properties, False, None, False)


schema: Final = SchemaDSL()
"""The DSL instance: ``schema.string(required=True)``, ``schema.object({...}, ...)``, …"""


def _is_number(value: object) -> bool:
    return (
        isinstance(value, int | float)
        and not isinstance(value, bool)
        and (not isinstance(value, float) or math.isfinite(value))
    )


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


_TYPE_NAMES: Final = {
    String: "string",
    Number: "number",
    Integer: "integer",
    Boolean: "boolean",
    Null: "null",
    Array: "array",
    Object: "object",
}


def to_json_schema(node: Node) -> Any:
    """Emit the JSON Schema (draft 2020-12 vocabulary) of ``node``.

    A node made from a bare JSON Schema emits that schema as given; one nested in a DSL
    node has its ``$defs`` moved to the root ``$defs`` (renamed on a clash) and its
    ``$ref``s rewritten to match.
    """
    if node.bare is not None:
        return _bare(node)
    defs: dict[str, Any] = {}
    out = _emit(node, defs)
    if defs:
        out["$defs"] = {key: defs[key] for key in sorted(defs)}
    return out


def _bare(node: Node) -> Any:
    assert node.bare is not None
    doc = node.bare.document()
    if isinstance(doc, dict):  # what a DSL caller changed on the node (a parameter's doc)
        for key, value in (("description", node.description), ("title", node.title)):
            if value is not None and doc.get(key) != value:
                doc[key] = value
        if node.default is not MISSING and "default" not in doc:
            doc["default"] = node.default
    return doc


def _emit(node: Node, defs: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    type_name = _TYPE_NAMES.get(type(node))
    if type_name is not None:
        out["type"] = type_name
    if node.title is not None:
        out["title"] = node.title
    if node.description is not None:
        out["description"] = node.description
    if isinstance(node, String | Number | Integer | Boolean):
        if node.enum is not None:
            out["enum"] = list(node.enum)
        if node.const is not MISSING:
            out["const"] = node.const
    if isinstance(node, String):
        _put(out, "minLength", node.min_length)
        _put(out, "maxLength", node.max_length)
        _put(out, "pattern", node.pattern)
        _put(out, "format", node.format)
    elif isinstance(node, Number | Integer):
        _put(out, "minimum", node.minimum)
        _put(out, "maximum", node.maximum)
        _put(out, "exclusiveMinimum", node.exclusive_minimum)
        _put(out, "exclusiveMaximum", node.exclusive_maximum)
        _put(out, "multipleOf", node.multiple_of)
    elif isinstance(node, Array):
        if node.items is not None:
            out["items"] = _child(node.items, defs)
        _put(out, "minItems", node.min_items)
        _put(out, "maxItems", node.max_items)
    elif isinstance(node, Object):
        out["properties"] = {key: _child(child, defs) for key, child in node.properties}
        if node.required_names:
            out["required"] = [key for key, _ in node.properties if key in node.required_names]
        extra = node.additional_properties
        out["additionalProperties"] = extra if isinstance(extra, bool) else _child(extra, defs)
    elif isinstance(node, OneOf):
        out["oneOf"] = [_child(option, defs) for option in node.options]
    if node.default is not MISSING:
        out["default"] = node.default
    return out


def _child(node: Node, defs: dict[str, Any]) -> Any:
    return _emit(node, defs) if node.bare is None else _embed(_bare(node), defs)


def _put(out: dict[str, Any], key: str, value: object) -> None:
    if value is not None:
        out[key] = value


def _embed(doc: Any, defs: dict[str, Any]) -> Any:
    """Place a bare schema inside a DSL document: its definitions go to the root ``$defs``."""
    if not isinstance(doc, dict):
        return doc
    doc.pop("$schema", None)  # only a document's root may name its draft
    refs = [s for s in _subschemas(doc) if isinstance(s.get("$ref"), str)]
    if not refs or any("$id" in s for s in _subschemas(doc)):
        return doc  # nothing points into the document, or it resolves against its own $id
    moved: dict[str, str] = {}  # old pointer -> new pointer
    pending: list[tuple[str, Any]] = []
    for section in ("$defs", "definitions"):
        found = doc.pop(section, None)
        if not isinstance(found, dict):
            continue
        for name, sub in found.items():
            new = _free_name(defs, name, sub)
            moved[f"#/{section}/{_escape(name)}"] = f"#/$defs/{_escape(new)}"
            pending.append((new, sub))
    self_name: str | None = None
    if any(_points_home(s["$ref"], moved) for s in refs):
        title = doc.get("title")
        self_name = _free_name(defs, title if isinstance(title, str) else "Schema", doc)
    for _, sub in [*pending, ("", doc)]:
        for schema in _subschemas(sub):
            ref = schema.get("$ref")
            if isinstance(ref, str):
                schema["$ref"] = _rewrite(ref, moved, self_name)
    for name, sub in pending:
        defs[name] = sub
    if self_name is None:
        return doc
    defs[self_name] = doc
    return {"$ref": f"#/$defs/{_escape(self_name)}"}


def _points_home(ref: str, moved: Mapping[str, str]) -> bool:
    """True for a local ``$ref`` that no moved definition covers (``#`` or ``#/properties``)."""
    if not ref.startswith("#"):
        return False
    return not any(ref == old or ref.startswith(old + "/") for old in moved)


def _rewrite(ref: str, moved: Mapping[str, str], self_name: str | None) -> str:
    for old, new in moved.items():
        if ref == old or ref.startswith(old + "/"):
            return new + ref[len(old) :]
    if self_name is not None and ref.startswith("#"):
        return f"#/$defs/{_escape(self_name)}" + ref[1:]
    return ref


def _escape(name: str) -> str:
    return name.replace("~", "~0").replace("/", "~1")


def _free_name(defs: Mapping[str, Any], name: str, content: Any) -> str:
    candidate, n = name, 2
    while candidate in defs and defs[candidate] != content:
        candidate, n = f"{name}_{n}", n + 1
    return candidate


def _subschemas(doc: Any) -> list[dict[str, Any]]:
    """Every dict in a document (iteratively; data keywords included, which is harmless)."""
    found: list[dict[str, Any]] = []
    stack = [doc]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            found.append(item)
            stack.extend(v for k, v in item.items() if k not in ("enum", "const", "default"))
        elif isinstance(item, list):
            stack.extend(item)
    return found
