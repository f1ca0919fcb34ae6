"""Validation messages a model can act on: JSON path, what was expected, what was given."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any, Final

__all__ = ("describe", "explain", "format_parts", "limit_text")

_IDENT: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_TYPE_ORDER: Final = ("object", "array", "string", "integer", "number", "boolean", "null")
_SHAPE_KINDS: Final = frozenset({"Type", "Constant", "Enum", "FalseSchema"})


_PATH_CHARS: Final = 200


def format_parts(parts: Sequence[str | int]) -> str:
    """Render a path as ``$.items[3]["odd key"]``; a very long one keeps its two ends."""
    out = ["$"]
    for key in parts:
        if isinstance(key, int):
            out.append(f"[{key}]")
        elif _IDENT.match(key):
            out.append(f".{key}")
        else:
            out.append(f"[{json.dumps(key, ensure_ascii=False)}]")
    text = "".join(out)
    if len(text) > _PATH_CHARS:
        half = _PATH_CHARS // 2
        text = text[:half] + "…" + text[-half:]
    return text


def limit_text(text: str, limit: int) -> str:
    """Cut ``text`` to ``limit`` characters, marking the cut with an ellipsis."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def describe(value: Any) -> str:
    """What a value is, briefly: ``integer 3``, ``string "ab"``, ``object``."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        text = str(value) if value.bit_length() < 128 else "a large integer"
        return f"integer {text}"
    if isinstance(value, float):
        return f"number {value!r}"
    if isinstance(value, str):
        shown = value if len(value) <= 40 else value[:40] + "…"
        return f"string {json.dumps(shown, ensure_ascii=False)}"
    if isinstance(value, dict):
        return "object"
    if isinstance(value, list):
        return "array"
    return f"a non-JSON {type(value).__name__}"


def _json(value: Any, limit: int = 120) -> str:
    return limit_text(json.dumps(value, ensure_ascii=False, default=str), limit)


def _number(value: Any) -> str:
    return json.dumps(value) if isinstance(value, int | float) else str(value)


def _expected(kind: str, facts: dict[str, Any]) -> str | None:
    """The expectation of one failed keyword, or None when the kind has its own wording."""
    limit = facts.get("limit")
    simple = {
        "Minimum": f"number >= {_number(limit)}",
        "Maximum": f"number <= {_number(limit)}",
        "ExclusiveMinimum": f"number > {_number(limit)}",
        "ExclusiveMaximum": f"number < {_number(limit)}",
        "MinLength": f"string of at least {limit} characters",
        "MaxLength": f"string of at most {limit} characters",
        "MinItems": f"array of at least {limit} items",
        "MaxItems": f"array of at most {limit} items",
        "MinProperties": f"object with at least {limit} properties",
        "MaxProperties": f"object with at most {limit} properties",
        "UniqueItems": "array of unique items",
        "Contains": "array with an item matching the 'contains' schema",
        "FalseSchema": "no value here (the schema is false)",
        "AdditionalItems": f"array of at most {limit} items",
        "UnevaluatedItems": "no further items (unevaluatedItems)",
    }
    if kind in simple:
        return simple[kind]
    if kind == "Type":
        types = [str(t) for t in facts.get("types", [])]
        return " or ".join(sorted(types, key=lambda t: (_rank(t), t)))
    if kind == "Enum":
        return "one of " + _json(facts.get("options"))
    if kind == "Constant":
        return _json(facts.get("expected_value"))
    if kind == "Pattern":
        return f"string matching /{facts.get('pattern')}/"
    if kind in ("BacktrackLimitExceeded", "RegexEngineFailure"):
        return "string the pattern can be checked against (the regex gave up)"
    if kind == "MultipleOf":
        return f"multiple of {_number(facts.get('multiple_of'))}"
    if kind == "Not":
        return "a value not matching " + _json(facts.get("schema"), 80)
    if kind == "ContentEncoding":
        return f"string in {facts.get('content_encoding', 'the declared')} encoding"
    if kind == "ContentMediaType":
        return f"string of media type {facts.get('content_media_type', '(declared)')}"
    if kind == "Format":
        return f"string in format {facts.get('format')}"
    return None


def _rank(name: str) -> int:
    return _TYPE_ORDER.index(name) if name in _TYPE_ORDER else len(_TYPE_ORDER)


def _facts(error: Any) -> dict[str, Any]:
    try:
        facts = error.kind.as_dict()
    except Exception:  # pragma: no cover - a kind without facts
        return {}
    return facts if isinstance(facts, dict) else {}


def explain(error: Any, prefix: Sequence[str | int] = (), limit: int = 600) -> str:
    """One ``jsonschema_rs.ValidationError`` as ``$.path: expected X, got Y``."""
    kind = type(error.kind).__name__
    parts = [*prefix, *error.instance_path]
    where = format_parts(parts)
    facts = _facts(error)
    if kind == "Required":
        return f"{format_parts([*parts, str(facts.get('property'))])}: missing required property"
    if kind in ("AdditionalProperties", "UnevaluatedProperties"):
        unexpected = [str(key) for key in facts.get("unexpected", [])]
        first = unexpected[0] if unexpected else "?"
        more = f" (and {len(unexpected) - 1} more)" if len(unexpected) > 1 else ""
        return f"{format_parts([*parts, first])}: unexpected property (not allowed here){more}"
    if kind == "PropertyNames":
        inner = facts.get("error")
        if inner is None:
            return f"{where}: a property name is not allowed"
        name = _json(inner.instance, 60)
        expected = _expected(type(inner.kind).__name__, _facts(inner)) or inner.message
        return f"{where}: property name {name} is not allowed: expected {expected}"
    if kind in ("AnyOf", "OneOfNotValid"):
        return _no_branch(error, kind, parts, facts, limit)
    if kind == "OneOfMultipleValid":
        context = facts.get("context") or []
        matched = [str(i + 1) for i, branch in enumerate(context) if not branch]
        which = f"alternatives {', '.join(matched)} all matched" if matched else "more matched"
        return f"{where}: expected a value matching exactly one of {len(context)} alternatives, but {which}"
    if kind == "Referencing":
        return f"{where}: the schema has a reference that cannot be resolved: {error.message}"
    expected = _expected(kind, facts)
    if expected is None:
        return f"{where}: {error.message}"
    return f"{where}: expected {expected}, got {describe(error.instance)}"


def _no_branch(
    error: Any, kind: str, parts: list[str | int], facts: dict[str, Any], limit: int
) -> str:
    """No alternative matched: say which came closest (or merge plain type mismatches)."""
    where = format_parts(parts)
    branches: list[list[Any]] = [list(b) for b in facts.get("context") or []]
    word = "one" if kind == "AnyOf" else "exactly one"
    depth = len(error.instance_path)
    if branches and all(
        len(b) == 1 and type(b[0].kind).__name__ == "Type" and len(b[0].instance_path) == depth
        for b in branches
    ):
        types: list[str] = []
        for branch in branches:
            types.extend(str(t) for t in _facts(branch[0]).get("types", []))
        merged = sorted(dict.fromkeys(types), key=lambda t: (_rank(t), t))
        return f"{where}: expected {' or '.join(merged)}, got {describe(error.instance)}"
    if not branches:
        return f"{where}: expected a value matching {word} of the alternatives, none did"

    def score(index: int) -> tuple[int, int, int, int]:
        found = branches[index]
        shallow = any(
            type(e.kind).__name__ in _SHAPE_KINDS and len(e.instance_path) <= depth + 1
            for e in found
        )
        deepest = max((len(e.instance_path) for e in found), default=depth)
        return (int(shallow), -deepest, len(found), index)

    best = min(range(len(branches)), key=score)
    inner = branches[best][0] if branches[best] else None
    detail = explain(inner, [*parts[: len(parts) - depth]], limit) if inner is not None else ""
    head = f"{where}: expected a value matching {word} of {len(branches)} alternatives, none did"
    return f"{head} (closest, alternative {best + 1}: {detail})" if detail else head
