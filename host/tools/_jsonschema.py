"""Bare JSON Schema: bounded, checked against its meta-schema, compiled by ``jsonschema-rs``.

A bare schema is kept as given (what the model reads) and validated by a standard-conforming
compiled validator. Before the library sees anything, an explicit-stack walk bounds the
schema document and every value (depth, size, JSON-ness), so no recursion in the library
can run away. Loosening (for schemas from MCP servers) cuts what is invalid, never stricter.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Final

import jsonschema_rs

from ._exceptions import SchemaError
from ._explain import explain, format_parts, limit_text
from ._json import canonical_json, freeze, thaw

__all__ = ("BareSchema", "SchemaLimits", "compile_schema", "pointer")


@dataclass(frozen=True, slots=True)
class SchemaLimits:
    """Bounds on bare JSON Schema work, checked before the validator library runs."""

    max_schema_depth: int = 64
    """Nesting of objects and arrays in one schema document."""
    max_schema_nodes: int = 200_000
    """Objects, arrays and scalars in one schema document."""
    max_value_depth: int = 512
    """Nesting of a value checked against a bare schema (deeper values are invalid)."""
    max_message_chars: int = 600
    """Length of one validation message; longer ones are cut with an ellipsis."""

    def __post_init__(self) -> None:
        for name in ("max_schema_depth", "max_schema_nodes", "max_value_depth"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"SchemaLimits.{name} must be a positive int, got {value!r}")
        if not isinstance(self.max_message_chars, int) or self.max_message_chars < 40:
            raise ValueError("SchemaLimits.max_message_chars must be an int >= 40")


DEFAULT_LIMITS: Final = SchemaLimits()

_DRAFTS: Final[dict[str, type[jsonschema_rs.Validator]]] = {
    "json-schema.org/draft-04/schema": jsonschema_rs.Draft4Validator,
    "json-schema.org/draft-06/schema": jsonschema_rs.Draft6Validator,
    "json-schema.org/draft-07/schema": jsonschema_rs.Draft7Validator,
    "json-schema.org/draft/2019-09/schema": jsonschema_rs.Draft201909Validator,
    "json-schema.org/draft/2020-12/schema": jsonschema_rs.Draft202012Validator,
}
# Keywords whose values are data, not schemas: never walked as schema.
_DATA: Final = frozenset({"enum", "const", "default", "examples", "required", "$comment"})
_MAP_OF_SCHEMAS: Final = frozenset(
    {"properties", "patternProperties", "$defs", "definitions", "dependentSchemas"}
)
_LIST_OF_SCHEMAS: Final = frozenset({"allOf", "anyOf", "oneOf", "prefixItems"})
# Where a subschema that accepts more can make its parent accept less.
_NON_MONOTONE: Final = frozenset({"not", "oneOf", "if", "contains", "dependencies"})
_LEAVES: Final = (str, int, float, bool, type(None))


def pointer(parts: Iterator[str | int] | list[str | int] | tuple[str | int, ...]) -> str:
    """A JSON pointer as a URI fragment: ``#/properties/a~1b``."""
    out = "".join("/" + str(part).replace("~", "~0").replace("/", "~1") for part in parts)
    return "#" + out


class _Problem(Exception):
    """One problem of a schema document, at a pointer (internal: becomes a SchemaError)."""

    def __init__(self, parts: tuple[str | int, ...], text: str) -> None:
        super().__init__(text)
        self.parts = parts
        self.text = text

    def __str__(self) -> str:
        return f"invalid JSON Schema at {pointer(self.parts)}: {self.text}"


def _scan_schema(source: Any, limits: SchemaLimits) -> None:
    """Raise ``_Problem`` where the document is not JSON, too deep or too large."""
    stack: list[tuple[Any, tuple[str | int, ...], bool]] = [(source, (), False)]
    count = 0
    on_path: set[int] = set()  # shared subtrees are fine; only a cycle recurses forever
    while stack:
        item, parts, leaving = stack.pop()
        if leaving:
            on_path.discard(id(item))
            continue
        count += 1
        if count > limits.max_schema_nodes:
            raise _Problem((), f"larger than {limits.max_schema_nodes} nodes")
        if isinstance(item, float) and not math.isfinite(item):
            raise _Problem(parts, f"{item!r} is not a JSON number")
        if isinstance(item, _LEAVES):
            continue
        if not isinstance(item, Mapping | list | tuple):
            raise _Problem(parts, f"a non-JSON {type(item).__name__}")
        if len(parts) >= limits.max_schema_depth:
            raise _Problem(parts, f"nested deeper than {limits.max_schema_depth} levels")
        if id(item) in on_path:
            raise _Problem(parts, "a reference cycle in the document")
        on_path.add(id(item))
        stack.append((item, parts, True))
        if isinstance(item, Mapping):
            for key, child in item.items():
                if not isinstance(key, str):
                    raise _Problem(parts, f"an object key must be a string, got {key!r}")
                stack.append((child, (*parts, key), False))
        else:
            stack.extend((child, (*parts, index), False) for index, child in enumerate(item))


def _schemas(source: Any) -> Iterator[tuple[Mapping[str, Any], tuple[str | int, ...]]]:
    """Every schema object of a (scanned) document with its path, data keywords skipped."""
    stack: list[tuple[Any, tuple[str | int, ...]]] = [(source, ())]
    while stack:
        item, parts = stack.pop()
        if not isinstance(item, Mapping):
            continue
        yield item, parts
        for key, value in item.items():
            if key in _DATA:
                continue
            if key in _MAP_OF_SCHEMAS and isinstance(value, Mapping):
                stack.extend((child, (*parts, key, name)) for name, child in value.items())
            elif isinstance(value, list | tuple) and key in (*_LIST_OF_SCHEMAS, "items"):
                stack.extend((child, (*parts, key, i)) for i, child in enumerate(value))
            elif isinstance(value, Mapping) and key not in _MAP_OF_SCHEMAS:
                stack.append((value, (*parts, key)))


def _validator_class(source: Any) -> type[jsonschema_rs.Validator]:
    """The draft a document is written in: its ``$schema``, else guessed from legacy forms."""
    if isinstance(source, Mapping) and "$schema" in source:
        uri = source["$schema"]
        key = uri.split("://", 1)[-1].rstrip("#") if isinstance(uri, str) else None
        found = _DRAFTS.get(key or "")
        if found is None:
            raise _Problem(
                ("$schema",),
                f"unsupported $schema {uri!r} (drafts 4, 6, 7, 2019-09 and 2020-12 are)",
            )
        return found
    legacy: type[jsonschema_rs.Validator] = jsonschema_rs.Draft202012Validator
    for schema, _ in _schemas(source):
        if isinstance(schema.get("exclusiveMinimum"), bool) or isinstance(
            schema.get("exclusiveMaximum"), bool
        ):
            return jsonschema_rs.Draft4Validator  # OpenAPI 3.0 and draft-04 style bounds
        if isinstance(schema.get("items"), list) or "additionalItems" in schema:
            legacy = jsonschema_rs.Draft7Validator
        if isinstance(schema.get("dependencies"), Mapping):
            legacy = jsonschema_rs.Draft7Validator
    return legacy


def _nullable(source: Any) -> Any:
    """Honour OpenAPI's ``nullable: true`` (looser than ignoring it): a copy, or ``source``."""
    if not any(s.get("nullable") is True for s, _ in _schemas(source)):
        return source
    doc = thaw(source)
    for schema, _ in list(_schemas(doc)):
        if schema.get("nullable") is not True:
            continue
        assert isinstance(schema, dict)
        kind = schema.get("type")
        if isinstance(kind, str) and kind != "null":
            schema["type"] = [kind, "null"]
        elif isinstance(kind, list) and "null" not in kind:
            schema["type"] = [*kind, "null"]
        enum = schema.get("enum")
        if isinstance(enum, list) and None not in enum:
            enum.append(None)
        if kind is None and any(k in schema for k in ("$ref", "allOf", "anyOf", "oneOf")):
            inner = {k: schema.pop(k) for k in list(schema) if k != "nullable"}
            schema["anyOf"] = [inner, {"type": "null"}]
    return doc


def _refs(source: Any) -> Iterator[tuple[str, tuple[str | int, ...]]]:
    for schema, parts in _schemas(source):
        ref = schema.get("$ref")
        if isinstance(ref, str):
            yield ref, (*parts, "$ref")


def _compile(source: Any, cls: type[jsonschema_rs.Validator]) -> jsonschema_rs.Validator:
    """Compile with formats as annotations and no network; raise ``_Problem`` when invalid."""
    try:
        return cls(source, validate_formats=False, offline=True)
    except jsonschema_rs.ValidationError as exc:
        text = exc.message
        if exc.instance_path or "$ref" not in canonical_json(source):
            raise _Problem(tuple(exc.instance_path), text) from None
        raise _Problem(_ref_location(source, text), _ref_text(text)) from None
    except (jsonschema_rs.ReferencingError, ValueError, TypeError, OverflowError) as exc:
        raise _Problem(_ref_location(source, str(exc)), _ref_text(str(exc))) from None


def _ref_text(text: str) -> str:
    if "Retrieval is disabled" in text or "not present in a registry" in text:
        head = text.split(" is not present", 1)[0]
        return f"cannot resolve {head.strip()}: only references inside the document are followed"
    return f"cannot resolve a $ref: {text}"


def _ref_location(source: Any, text: str) -> tuple[str | int, ...]:
    for ref, parts in _refs(source):
        fragment = ref.split("#", 1)[-1]
        if (fragment and fragment in text) or ref in text:
            return parts
    return ()


def _cut(doc: Any, parts: tuple[str | int, ...]) -> tuple[str | int, ...]:
    """Where to replace a subschema by ``{}`` so the document accepts more, never less."""
    if any(k in s for s, _ in _schemas(doc) for k in _NON_MONOTONE) or any(
        part in ("$defs", "definitions") for part in parts
    ):
        return ()  # a subschema's effect is not local here: give up the whole document
    position: tuple[str | int, ...] = ()
    index = 0
    while index < len(parts):
        key = parts[index]
        if (
            key in _MAP_OF_SCHEMAS
            or key in _LIST_OF_SCHEMAS
            or (key == "items" and index + 1 < len(parts) and isinstance(parts[index + 1], int))
        ):
            if index + 1 >= len(parts):
                return position
            position = parts[: index + 2]
            index += 2
        elif key in ("items", "additionalProperties", "then", "else", "propertyNames") or key in (
            "unevaluatedProperties",
            "unevaluatedItems",
            "additionalItems",
        ):
            position = parts[: index + 1]
            index += 1
        else:
            return position
    return position


def _replace(doc: Any, parts: tuple[str | int, ...]) -> Any:
    if not parts:
        return {}
    root = thaw(doc)
    target: Any = root
    for part in parts[:-1]:
        target = target[part]
    target[parts[-1]] = {}
    return root


class BareSchema:
    """A bare JSON Schema: the document as given and its compiled, bounded validator."""

    __slots__ = ("_key", "_validator", "limits", "loosened", "source")

    source: Any
    """The document (frozen): as given, or with the invalid parts cut when compiled loose."""

    def __init__(self, source: Any, *, loose: bool = False, limits: SchemaLimits | None = None):
        self.limits = limits or DEFAULT_LIMITS
        self.loosened: tuple[str, ...] = ()  # what loosening cut, as problem texts
        if isinstance(source, bool):
            doc: Any = source
        elif isinstance(source, Mapping):
            doc = source
        elif loose:
            doc, self.loosened = {}, (f"not a JSON Schema: {type(source).__name__}",)
        else:
            raise SchemaError(
                f"a JSON Schema is an object or a boolean, got {type(source).__name__}"
            )
        try:
            _scan_schema(doc, self.limits)
        except _Problem as problem:
            if not loose:
                raise SchemaError(str(problem)) from None
            doc, self.loosened = {}, (str(problem),)
        doc, self._validator = self._build(doc, loose)
        self.source = freeze(doc)
        self._key = canonical_json(self.source)

    def _build(self, doc: Any, loose: bool) -> tuple[Any, jsonschema_rs.Validator]:
        cut: list[str] = list(self.loosened)
        for _ in range(64):
            try:
                return doc, _compile(_nullable(doc), _validator_class(doc))
            except _Problem as problem:
                if not loose:
                    raise SchemaError(str(problem)) from None
                cut.append(str(problem))
                self.loosened = tuple(cut)
                doc = _replace(doc, _cut(doc, problem.parts))
        self.loosened = (*cut, "too many problems: the whole schema")
        return {}, jsonschema_rs.Draft202012Validator({})

    def __eq__(self, other: object) -> bool:
        return isinstance(other, BareSchema) and other._key == self._key

    def __hash__(self) -> int:
        return hash(self._key)

    def __repr__(self) -> str:
        return f"BareSchema({limit_text(getattr(self, '_key', '?'), 80)})"

    def document(self) -> Any:
        """A fresh, mutable copy of the schema as given."""
        return thaw(self.source)

    def check(self, value: Any, prefix: tuple[str | int, ...] = ()) -> str | None:
        """Validate ``value``; return the first error message (JSON path, expected, got)."""
        limit = self.limits.max_message_chars
        problem = scan_value(value, self.limits.max_value_depth)
        if problem is not None:
            parts, text = problem
            return limit_text(f"{format_parts((*prefix, *parts))}: {text}", limit)
        try:
            if self._validator.is_valid(value):
                return None
            error = next(iter(self._validator.iter_errors(value)), None)
        except (ValueError, UnicodeError, OverflowError) as exc:
            where = _surrogate(value)
            text = "a string with a lone surrogate" if where is not None else str(exc)
            return limit_text(
                f"{format_parts((*prefix, *(where or ())))}: expected a JSON value, got {text}",
                limit,
            )
        if error is None:  # pragma: no cover - is_valid and iter_errors disagree
            return None
        return limit_text(explain(error, prefix, limit), limit)


def compile_schema(
    source: Any, *, loose: bool = False, limits: SchemaLimits | None = None
) -> BareSchema:
    """Check and compile a bare JSON Schema (``SchemaError`` names the pointer and problem)."""
    return BareSchema(source, loose=loose, limits=limits)


def scan_value(value: Any, max_depth: int) -> tuple[tuple[str | int, ...], str] | None:
    """Where ``value`` is not lossless JSON or nests deeper than ``max_depth``; else None."""
    if type(value) is dict and _flat(value):
        return None
    stack: list[tuple[Any, tuple[str | int, ...], bool]] = [(value, (), False)]
    on_path: set[int] = set()
    while stack:
        item, parts, leaving = stack.pop()
        if leaving:
            on_path.discard(id(item))
            continue
        if isinstance(item, float):
            if not math.isfinite(item):
                return parts, f"expected a finite number, got {item!r}"
            continue
        if item is None or isinstance(item, str | int):
            continue
        if not isinstance(item, dict | list):
            return parts, f"expected a JSON value, got a non-JSON {type(item).__name__}"
        if len(parts) >= max_depth:
            return parts, f"expected a value nested at most {max_depth} levels deep"
        if id(item) in on_path:
            return parts, "expected a JSON value, got a reference cycle"
        on_path.add(id(item))
        stack.append((item, parts, True))
        if isinstance(item, dict):
            for key, child in item.items():
                if not isinstance(key, str):
                    return parts, f"expected an object with string keys, got key {key!r}"
                stack.append((child, (*parts, key), False))
        else:
            stack.extend((child, (*parts, i), False) for i, child in enumerate(item))
    return None


def _flat(value: dict[Any, Any]) -> bool:
    """True for the common tool arguments: string keys, scalar values, finite floats."""
    for key, child in value.items():
        kind = type(child)
        if type(key) is not str:
            return False
        if kind is str or kind is int or kind is bool or child is None:
            continue
        if kind is not float or not math.isfinite(child):
            return False
    return True


def _surrogate(value: Any) -> tuple[str | int, ...] | None:
    stack: list[tuple[Any, tuple[str | int, ...]]] = [(value, ())]
    while stack:
        item, parts = stack.pop()
        if isinstance(item, str):
            try:
                item.encode("utf-8")
            except UnicodeEncodeError:
                return parts
        elif isinstance(item, dict):
            for key, child in item.items():
                stack.append((key, parts))
                stack.append((child, (*parts, key)))
        elif isinstance(item, list):
            stack.extend((child, (*parts, i)) for i, child in enumerate(item))
    return None
