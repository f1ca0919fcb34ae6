"""Hypothesis strategies shared by the host.tools tests: schema nodes and matching values."""

from __future__ import annotations

import dataclasses
from typing import Any

from hypothesis import strategies as st

from host.tools import (
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
)

KEYS = st.sampled_from(["a", "b", "c", "d e"])
TEXT = st.text(alphabet="ab01 ", max_size=4)
FLOATS = st.floats(min_value=-10, max_value=10, allow_nan=False, allow_infinity=False)
PATTERNS = st.sampled_from([None, "^a", "b$", "[0-9]+", "^$"])
SMALL = st.none() | st.integers(min_value=0, max_value=3)
BOUND = st.none() | st.integers(min_value=-3, max_value=3)

json_values: st.SearchStrategy[Any] = st.recursive(
    st.none() | st.booleans() | st.integers(min_value=-5, max_value=5) | FLOATS | TEXT,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(KEYS, inner, max_size=3),
    max_leaves=10,
)


def _with_required(node: Node, required: bool) -> Node:
    return dataclasses.replace(node, required=required)


scalar_nodes: st.SearchStrategy[Node] = st.one_of(
    st.builds(
        lambda lo, hi, pattern: schema.string(min_length=lo, max_length=hi, pattern=pattern),
        SMALL,
        SMALL,
        PATTERNS,
    ),
    st.builds(lambda values: schema.string(enum=values), st.lists(TEXT, min_size=1, max_size=3)),
    st.builds(lambda value: schema.string(const=value), TEXT),
    st.builds(
        lambda lo, hi, xlo, xhi: schema.number(
            minimum=lo, maximum=hi, exclusive_minimum=xlo, exclusive_maximum=xhi
        ),
        BOUND,
        BOUND,
        BOUND,
        BOUND,
    ),
    st.builds(lambda lo, hi: schema.integer(minimum=lo, maximum=hi), BOUND, BOUND),
    st.builds(
        lambda values: schema.integer(enum=values),
        st.lists(st.integers(-3, 3), min_size=1, max_size=3),
    ),
    st.builds(lambda value: schema.boolean(const=value), st.booleans()),
    st.just(schema.boolean()),
    st.just(schema.null()),
    st.just(schema.json()),
)


def _containers(inner: st.SearchStrategy[Node]) -> st.SearchStrategy[Node]:
    props = st.dictionaries(KEYS, st.tuples(inner, st.booleans()), max_size=3)
    extra = st.booleans() | inner
    return st.one_of(
        st.builds(
            lambda items, lo, hi: schema.array(items, min_items=lo, max_items=hi),
            st.none() | inner,
            SMALL,
            SMALL,
        ),
        st.builds(
            lambda p, x: schema.object(
                {k: _with_required(n, r) for k, (n, r) in p.items()}, additional_properties=x
            ),
            props,
            extra,
        ),
        st.builds(lambda options: schema.one_of(*options), st.lists(inner, min_size=1, max_size=3)),
    )


nodes: st.SearchStrategy[Node] = st.recursive(scalar_nodes, _containers, max_leaves=6)


def values_for(node: Node) -> st.SearchStrategy[Any]:
    """Values that often (not always) match ``node``."""
    if isinstance(node, String):
        if node.enum is not None:
            return st.sampled_from(node.enum)
        if isinstance(node.const, str):
            return st.just(node.const)
        return TEXT
    if isinstance(node, Integer):
        if node.enum is not None:
            return st.sampled_from(node.enum)
        return st.integers(-4, 4)
    if isinstance(node, Number):
        return st.integers(-4, 4) | FLOATS
    if isinstance(node, Boolean):
        return st.booleans()
    if isinstance(node, Null):
        return st.none()
    if isinstance(node, Json):
        return json_values
    if isinstance(node, Array):
        return st.lists(json_values if node.items is None else values_for(node.items), max_size=4)
    if isinstance(node, Object):
        required = {k: values_for(n) for k, n in node.properties if n.required}
        optional = {k: values_for(n) for k, n in node.properties if not n.required}
        return st.fixed_dictionaries(required, optional=optional)
    assert isinstance(node, OneOf)
    return st.one_of([values_for(option) for option in node.options])


# Bare JSON Schemas (2020-12) with the keywords real tools use, for the differential test.
_INTS = st.integers(min_value=-3, max_value=3)
_COUNTS = st.integers(min_value=0, max_value=3)
_leaf_schemas: st.SearchStrategy[Any] = st.one_of(
    st.just({}),
    st.just(True),
    st.just(False),
    st.sampled_from(["string", "integer", "number", "boolean", "null", "array", "object"]).map(
        lambda kind: {"type": kind}
    ),
    st.lists(
        st.sampled_from(["string", "integer", "number", "null"]),
        min_size=1,
        max_size=3,
        unique=True,
    ).map(lambda kinds: {"type": kinds}),
    st.builds(lambda lo: {"minimum": lo}, _INTS),
    st.builds(lambda hi: {"exclusiveMaximum": hi}, _INTS),
    st.builds(lambda step: {"multipleOf": step}, st.integers(min_value=1, max_value=3)),
    st.builds(lambda n: {"minLength": n}, _COUNTS),
    st.builds(lambda n: {"maxLength": n}, _COUNTS),
    st.sampled_from(["^a", "b$", "[0-9]", "^$"]).map(lambda p: {"pattern": p}),
    st.builds(lambda v: {"const": v}, json_values),
    st.lists(json_values, min_size=1, max_size=3).map(lambda vs: {"enum": vs}),
    st.builds(lambda n: {"minItems": n}, _COUNTS),
    st.builds(lambda n: {"maxProperties": n}, _COUNTS),
    st.just({"uniqueItems": True}),
    st.builds(lambda keys: {"required": keys}, st.lists(KEYS, max_size=2, unique=True)),
    st.builds(lambda a, b: {"dependentRequired": {a: [b]}}, KEYS, KEYS),
    st.just({"format": "email"}),
)


def _compound(inner: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    props = st.dictionaries(KEYS, inner, max_size=3)
    return st.one_of(
        st.builds(lambda p: {"type": "object", "properties": p}, props),
        st.builds(lambda p, extra: {"properties": p, "additionalProperties": extra}, props, inner),
        st.builds(lambda p: {"properties": p, "unevaluatedProperties": False}, props),
        st.builds(lambda p: {"patternProperties": {"^a": p}}, inner),
        st.builds(lambda p: {"propertyNames": p}, inner),
        st.builds(lambda i: {"type": "array", "items": i}, inner),
        st.builds(
            lambda pre, rest: {"prefixItems": pre, "items": rest},
            st.lists(inner, min_size=1, max_size=2),
            inner,
        ),
        st.builds(lambda c: {"contains": c}, inner),
        st.builds(lambda ms: {"anyOf": ms}, st.lists(inner, min_size=1, max_size=3)),
        st.builds(lambda ms: {"oneOf": ms}, st.lists(inner, min_size=1, max_size=3)),
        st.builds(lambda ms: {"allOf": ms}, st.lists(inner, min_size=1, max_size=3)),
        st.builds(lambda n: {"not": n}, inner),
        st.builds(lambda i, t, e: {"if": i, "then": t, "else": e}, inner, inner, inner),
        st.builds(
            lambda a, b: {**a, **b} if isinstance(a, dict) and isinstance(b, dict) else a,
            inner,
            inner,
        ),
    )


json_schemas: st.SearchStrategy[Any] = st.recursive(_leaf_schemas, _compound, max_leaves=6)
