"""Tidy the SDK's intermediate form: one name per shape, and parameter docs said once."""

from __future__ import annotations

from collections.abc import Mapping

from sdkgen._names import RESERVED_TYPE_NAMES, camel
from sdkgen._nodes import (
    AliasDef,
    Field,
    ListOf,
    MapOf,
    Named,
    ObjectDef,
    Params,
    Sdk,
    ToolDef,
    TupleOf,
    TypeDef,
    TypeNode,
    UnionOf,
)

# A parameter doc is said once, at the top, when this many tools share it word for word.
_SHARED_DOC_MIN_TOOLS = 2


def tidy(sdk: Sdk) -> Sdk:
    """Merge named types of the same shape and pull out parameter docs several tools share."""
    return _share_docs(_merge_types(sdk))


def _merge_types(sdk: Sdk) -> Sdk:
    """Give types with the same content one name (the first in order), until nothing changes."""
    rename: dict[str, str] = {}
    types = list(sdk.types)
    for _ in range(len(types) + 1):
        seen: dict[object, str] = {}
        changed = False
        for definition in types:
            if definition.name in rename:
                continue
            key = _content(_rename_def(definition, rename))
            first = seen.setdefault(key, definition.name)
            if first != definition.name:
                rename[definition.name] = first
                changed = True
        if not changed:
            break
    if not rename:
        return sdk
    merged = set(rename)
    _neutral_names(types, rename, {tool.py_name for tool in sdk.tools})
    kept = tuple(
        _named(_rename_def(d, rename), rename.get(d.name, d.name))
        for d in types
        if d.name not in merged
    )
    tools = tuple(_rename_tool(tool, rename) for tool in sdk.tools)
    return Sdk(tools, kept, sdk.shared_docs)


def _neutral_names(types: list[TypeDef], rename: dict[str, str], taken: set[str]) -> None:
    """A result shape several tools share is named by its keys, not by the first tool."""
    groups: dict[str, list[str]] = {}
    for name, first in rename.items():
        groups.setdefault(first, [first]).append(name)
    names = {d.name for d in types} | taken | RESERVED_TYPE_NAMES
    by_name = {d.name: d for d in types}
    for first, members in sorted(groups.items()):
        definition = by_name[first]
        if not isinstance(definition, ObjectDef) or not all(m.endswith("Result") for m in members):
            continue
        keys = [f.key for f in definition.fields]
        neutral = "".join(camel(key) for key in keys[:3]) + "Result"
        if len(keys) > 3 or neutral in names:
            continue
        names.add(neutral)
        for member in members:
            rename[member] = neutral
        rename[first] = neutral


def _named(definition: TypeDef, name: str) -> TypeDef:
    if definition.name == name:
        return definition
    if isinstance(definition, ObjectDef):
        return ObjectDef(name, definition.doc, definition.fields)
    return AliasDef(name, definition.doc, definition.target)


def _content(definition: TypeDef) -> object:
    if isinstance(definition, ObjectDef):
        return ("object", definition.doc, definition.fields)
    return ("alias", definition.doc, definition.target)


def _rename(node: TypeNode, names: Mapping[str, str]) -> TypeNode:
    match node:
        case Named(name=name):
            return Named(names.get(name, name))
        case ListOf(item=item):
            return ListOf(_rename(item, names))
        case TupleOf(items=items, rest=rest):
            return TupleOf(
                tuple(_rename(i, names) for i in items),
                None if rest is None else _rename(rest, names),
            )
        case MapOf(value=value):
            return MapOf(_rename(value, names))
        case UnionOf(members=members):
            return UnionOf(tuple(_rename(m, names) for m in members))
    return node


def _rename_field(field: Field, names: Mapping[str, str]) -> Field:
    return Field(field.key, _rename(field.type, names), field.required, field.doc, field.default)


def _rename_def(definition: TypeDef, names: Mapping[str, str]) -> TypeDef:
    if isinstance(definition, ObjectDef):
        fields = tuple(_rename_field(f, names) for f in definition.fields)
        return ObjectDef(definition.name, definition.doc, fields)
    return AliasDef(definition.name, definition.doc, _rename(definition.target, names))


def _rename_tool(tool: ToolDef, names: Mapping[str, str]) -> ToolDef:
    params = tool.params
    new_params = Params(
        tuple(_rename_field(f, names) for f in params.fields),
        None if params.args_type is None else names.get(params.args_type, params.args_type),
        None if params.extra is None else _rename(params.extra, names),
    )
    return ToolDef(
        tool.name,
        tool.py_name,
        tool.doc,
        new_params,
        _rename(tool.returns, names),
        tool.returns_doc,
    )


def _share_docs(sdk: Sdk) -> Sdk:
    """Say a parameter's doc once when several tools document it with the same words."""
    counts: dict[tuple[str, str], int] = {}
    for tool in sdk.tools:
        for field in tool.params.fields:
            if field.doc:
                pair = (field.key, field.doc)
                counts[pair] = counts.get(pair, 0) + 1
    best: dict[str, tuple[int, str]] = {}
    for (key, doc), count in sorted(counts.items()):
        if count >= _SHARED_DOC_MIN_TOOLS and (key not in best or count > best[key][0]):
            best[key] = (count, doc)
    if not best:
        return sdk
    shared = {key: doc for key, (_, doc) in best.items()}
    tools = []
    for tool in sdk.tools:
        fields = tuple(
            Field(f.key, f.type, f.required, "", f.default) if shared.get(f.key) == f.doc else f
            for f in tool.params.fields
        )
        params = Params(fields, tool.params.args_type, tool.params.extra)
        tools.append(
            ToolDef(tool.name, tool.py_name, tool.doc, params, tool.returns, tool.returns_doc)
        )
    return Sdk(tuple(tools), sdk.types, tuple(sorted(shared.items())))
