"""The schema model: a closed family of nodes, the explicit DSL, and JSON Schema in and out."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from ._exceptions import SchemaError

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
    "from_json_schema",
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
    """A schema node; ``required`` only matters for a property of an object."""

    description: str | None = None
    default: Any = MISSING
    required: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class String(Node):
    """A JSON string, with optional enum/const, length bounds and a regex ``pattern`` (search)."""

    enum: tuple[str, ...] | None = None
    const: Any = MISSING
    min_length: int | None = None
    max_length: int | None = None
    pattern: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Number(Node):
    """A finite JSON number (int or float, never bool), with optional enum/const and bounds."""

    enum: tuple[float, ...] | None = None
    const: Any = MISSING
    minimum: float | None = None
    maximum: float | None = None
    exclusive_minimum: float | None = None
    exclusive_maximum: float | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Integer(Node):
    """A JSON integer (a Python ``int``, never bool or float), with enum/const and bounds."""

    enum: tuple[int, ...] | None = None
    const: Any = MISSING
    minimum: float | None = None
    maximum: float | None = None
    exclusive_minimum: float | None = None
    exclusive_maximum: float | None = None


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
        default: Any = MISSING,
    ) -> String:
        """A string node."""
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
        default: Any = MISSING,
    ) -> Number:
        """A number node (ints and finite floats)."""
        _check_bounds("number", minimum, maximum, exclusive_minimum, exclusive_maximum)
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
        default: Any = MISSING,
    ) -> Integer:
        """An integer node."""
        _check_bounds("integer", minimum, maximum, exclusive_minimum, exclusive_maximum)
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
        """The implicit parameter root: an open object of ``properties``."""
        return _object(properties, True, None, False)


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


def to_json_schema(node: Node) -> dict[str, Any]:
    """Emit the JSON Schema (draft 2020-12 vocabulary) of ``node``."""
    out: dict[str, Any] = {}
    type_name = _TYPE_NAMES.get(type(node))
    if type_name is not None:
        out["type"] = type_name
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
    elif isinstance(node, Number | Integer):
        _put(out, "minimum", node.minimum)
        _put(out, "maximum", node.maximum)
        _put(out, "exclusiveMinimum", node.exclusive_minimum)
        _put(out, "exclusiveMaximum", node.exclusive_maximum)
    elif isinstance(node, Array):
        if node.items is not None:
            out["items"] = to_json_schema(node.items)
        _put(out, "minItems", node.min_items)
        _put(out, "maxItems", node.max_items)
    elif isinstance(node, Object):
        out["properties"] = {key: to_json_schema(child) for key, child in node.properties}
        if node.required_names:
            out["required"] = [key for key, _ in node.properties if key in node.required_names]
        extra = node.additional_properties
        out["additionalProperties"] = extra if isinstance(extra, bool) else to_json_schema(extra)
    elif isinstance(node, OneOf):
        out["oneOf"] = [to_json_schema(option) for option in node.options]
    if node.default is not MISSING:
        out["default"] = node.default
    return out


def _put(out: dict[str, Any], key: str, value: object) -> None:
    if value is not None:
        out[key] = value


_IGNORED: Final = frozenset({"$schema", "$id", "title", "examples", "$comment", "format"})
_KNOWN: Final = frozenset(
    {
        "type", "description", "default", "enum", "const", "minLength", "maxLength", "pattern",
        "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "items", "minItems",
        "maxItems", "properties", "required", "additionalProperties", "oneOf",
    }
)  # fmt: skip


def from_json_schema(source: Mapping[str, Any] | bool, *, required: bool = False) -> Node:
    """Translate a bare JSON Schema (a supported subset) into a node; objects stay open."""
    if source is True or source == {}:
        return Json(required=required)
    if not isinstance(source, Mapping):
        raise SchemaError(f"unsupported JSON Schema {source!r}")
    unknown = set(source) - _KNOWN - _IGNORED
    if unknown:
        raise SchemaError(f"unsupported JSON Schema keywords: {sorted(unknown)}")
    common: dict[str, Any] = {"description": source.get("description"), "required": required}
    if "default" in source:
        common["default"] = source["default"]
    if "oneOf" in source:
        options = tuple(from_json_schema(option) for option in source["oneOf"])
        return OneOf(options=options, description=common["description"], required=required)
    kind = source.get("type")
    if isinstance(kind, list):
        options = tuple(from_json_schema({**source, "type": item}) for item in kind)
        return OneOf(options=options, description=common["description"], required=required)
    if kind is None:
        kind = _infer_kind(source)
    bounds: dict[str, Any] = {
        "minimum": source.get("minimum"),
        "maximum": source.get("maximum"),
        "exclusive_minimum": source.get("exclusiveMinimum"),
        "exclusive_maximum": source.get("exclusiveMaximum"),
    }
    enum = source.get("enum")
    const = source.get("const", MISSING)
    if kind == "string":
        return schema.string(
            **common,
            enum=enum,
            const=const,
            min_length=source.get("minLength"),
            max_length=source.get("maxLength"),
            pattern=source.get("pattern"),
        )
    if kind == "number":
        return schema.number(**common, enum=enum, const=const, **bounds)
    if kind == "integer":
        return schema.integer(**common, enum=enum, const=const, **bounds)
    if kind == "boolean":
        return schema.boolean(**common, enum=enum, const=const)
    if kind == "null":
        return schema.null(description=common["description"], required=required)
    if kind == "array":
        items = source.get("items")
        return schema.array(
            None if items is None else from_json_schema(items),
            **common,
            min_items=source.get("minItems"),
            max_items=source.get("maxItems"),
        )
    if kind == "object":
        needed = set(source.get("required", ()))
        props = {
            key: from_json_schema(child, required=key in needed)
            for key, child in source.get("properties", {}).items()
        }
        missing = needed - set(props)
        for key in sorted(missing):
            props[key] = Json(required=True)
        extra = source.get("additionalProperties", True)
        extra_node: bool | Node = extra if isinstance(extra, bool) else from_json_schema(extra)
        return _object(
            props, extra_node, common["description"], required, common.get("default", MISSING)
        )
    if kind == "any":
        return Json(description=common["description"], required=required)
    raise SchemaError(f"unsupported JSON Schema type {kind!r}")


def _infer_kind(source: Mapping[str, Any]) -> str:
    values = list(source.get("enum", ()))
    if "const" in source:
        values.append(source["const"])
    if not values:
        return "any"
    kinds = {
        "boolean" if isinstance(v, bool) else "integer" if _is_int(v) else
        "number" if _is_number(v) else "string" if isinstance(v, str) else "?"
        for v in values
    }  # fmt: skip
    if kinds == {"integer", "number"}:
        return "number"
    if len(kinds) != 1 or "?" in kinds:
        raise SchemaError(f"enum/const without a single scalar type: {values!r}")
    return kinds.pop()
