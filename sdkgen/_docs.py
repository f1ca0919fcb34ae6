"""A property's documentation: its description, and the constraints its type cannot say."""

from __future__ import annotations

import json
from collections.abc import Mapping

from sdkgen._manifest import clean_text

_FACTS = (
    ("format", "format {}"),
    ("minimum", ">= {}"),
    ("exclusiveMinimum", "> {}"),
    ("maximum", "<= {}"),
    ("exclusiveMaximum", "< {}"),
    ("minLength", "min length {}"),
    ("maxLength", "max length {}"),
    ("minItems", "min items {}"),
    ("maxItems", "max items {}"),
    ("uniqueItems", "unique items"),
    ("pattern", "pattern {}"),
    ("multipleOf", "multiple of {}"),
    ("minProperties", "min properties {}"),
    ("maxProperties", "max properties {}"),
    ("propertyNames", "keys {}"),
    ("dependentRequired", "requires {}"),
    ("minContains", "min contains {}"),
    ("contains", "contains {}"),
    ("not", "not {}"),
    ("deprecated", "deprecated"),
)


def field_doc(schema: object) -> str:
    """Return a property's description with its constraints, e.g. `Page size (<= 100)`.

    Constraints the types cannot say (bounds, format, pattern, `not`, ...) are kept here.
    """
    if not isinstance(schema, Mapping):
        return ""
    facts = []
    for key, template in _FACTS:
        if key not in schema or schema[key] is False:
            continue
        value = schema[key]
        text = value if isinstance(value, str) and key in ("format", "pattern") else _json(value)
        if len(text) > 80:
            text = text[:79] + "…"
        facts.append(template.format(text))
    description = schema.get("description")
    doc = clean_text(description if isinstance(description, str) else "")
    if facts:
        doc = f"{doc} ({'; '.join(facts)})" if doc else f"({'; '.join(facts)})"
    return doc


def _json(value: object) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)
