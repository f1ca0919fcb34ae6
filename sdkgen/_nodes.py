"""The SDK as data: a closed family of nodes for types, named types and tools."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

PrimKind = Literal["str", "int", "float", "bool", "none", "json"]
LitValue = str | int | bool


@dataclass(frozen=True, slots=True)
class Prim:
    """A primitive: str, int, float, bool, none, or json (any JSON value)."""

    kind: PrimKind


@dataclass(frozen=True, slots=True)
class Lit:
    """One literal value from `enum` or `const`."""

    value: LitValue


@dataclass(frozen=True, slots=True)
class ListOf:
    """A JSON array of item."""

    item: TypeNode


@dataclass(frozen=True, slots=True)
class TupleOf:
    """A JSON array whose first items have their own types (`prefixItems`).

    `rest` types the items after them, or is None when there may be none.
    """

    items: tuple[TypeNode, ...]
    rest: TypeNode | None


@dataclass(frozen=True, slots=True)
class MapOf:
    """A JSON object with arbitrary keys and values of one type."""

    value: TypeNode


@dataclass(frozen=True, slots=True)
class UnionOf:
    """Any of several types (flat, deduplicated, two or more members)."""

    members: tuple[TypeNode, ...]


@dataclass(frozen=True, slots=True)
class Named:
    """A reference to a named type."""

    name: str


TypeNode = Prim | Lit | ListOf | TupleOf | MapOf | UnionOf | Named
JSON = Prim("json")
NONE = Prim("none")


@dataclass(frozen=True, slots=True)
class Field:
    """A property of an object shape, or a parameter of a tool."""

    key: str
    type: TypeNode
    required: bool
    doc: str
    default: str | None = None  # canonical JSON text of the schema's default


@dataclass(frozen=True, slots=True)
class ObjectDef:
    """A named object shape (TypedDict / interface)."""

    name: str
    doc: str
    fields: tuple[Field, ...]


@dataclass(frozen=True, slots=True)
class AliasDef:
    """A named alias for a type (from `$defs`)."""

    name: str
    doc: str
    target: TypeNode


TypeDef = ObjectDef | AliasDef


@dataclass(frozen=True, slots=True)
class Params:
    """How a tool takes its arguments.

    `fields` are named parameters; `args_type` names an ObjectDef when the arguments must
    be passed as `**args: Unpack[...]` (keys that are not Python names); `extra` types
    further keyword arguments (`additionalProperties`), or is None when there are none.
    """

    fields: tuple[Field, ...]
    args_type: str | None
    extra: TypeNode | None


@dataclass(frozen=True, slots=True)
class ToolDef:
    """One tool in the SDK."""

    name: str
    py_name: str
    doc: str
    params: Params
    returns: TypeNode
    returns_doc: str


@dataclass(frozen=True, slots=True)
class Sdk:
    """Every tool sorted by name and every named type in a fixed order."""

    tools: tuple[ToolDef, ...]
    types: tuple[TypeDef, ...]
    shared_docs: tuple[tuple[str, str], ...] = ()  # (parameter, doc) used by several tools
