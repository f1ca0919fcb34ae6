"""Emit the Python SDK text: a stub module the model reads and a type checker accepts."""

from __future__ import annotations

import json
import re

from sdkgen._ir import union
from sdkgen._names import is_py_name
from sdkgen._nodes import (
    AliasDef,
    Field,
    ListOf,
    Lit,
    MapOf,
    Named,
    ObjectDef,
    Prim,
    Sdk,
    ToolDef,
    TupleOf,
    TypeNode,
    UnionOf,
)

# No module docstring: the instructions that come with the SDK say how to call it.
_HEADER = """\
{imports}
JsonValue: TypeAlias = dict[str, JsonValue] | list[JsonValue] | str | int | float | bool | None
class ToolCallError(Exception):
 tool: str
 code: str
 message: str
"""
#: One space: a block needs no more, and each wider indent is a token more per line.
_INDENT = " "
_PRIMS = {"str": "str", "int": "int", "float": "float", "bool": "bool", "none": "None"}


def emit_python(sdk: Sdk, call_style: str = "async") -> str:
    """Return the Python stub text for sdk: the stub of a module `tools`, compact; its
    functions are `async def` (awaited calls) or `def` (plain calls, `call_style="sync"`)."""
    parts = []
    if sdk.shared_docs:
        parts.append("# Parameters documented once for every tool below:\n")
        parts.extend(f"# {key}: {_one_line(doc)}\n" for key, doc in sdk.shared_docs)
    shadowing = _ANNOTATION_NAMES | {definition.name for definition in sdk.types}
    for definition in sdk.types:
        if isinstance(definition, ObjectDef):
            parts.append(_object(definition, shadowing))
        else:
            parts.append(_alias(definition))
    parts.append(_tools(sdk.tools, "def" if call_style == "sync" else "async def"))
    body = "".join(parts)
    used = [name for name in _TYPING if re.search(rf"\b{name}\b", body)]
    imports = f"from typing import {', '.join(sorted([*used, 'TypeAlias']))}"
    return _HEADER.replace("{imports}", imports) + body


_TYPING = ("Literal", "NotRequired", "TypedDict", "Unpack")


def py_type(node: TypeNode) -> str:
    """Return the Python annotation for a type node."""
    match node:
        case Prim(kind="json"):
            return "JsonValue"
        case Prim(kind=kind):
            return _PRIMS[kind]
        case Lit(value=value):
            return f"Literal[{_literal(value)}]"
        case ListOf(item=item):
            return f"list[{py_type(item)}]"
        case TupleOf(items=items, rest=rest):
            return f"list[{py_type(union([*items, *([] if rest is None else [rest])]))}]"
        case MapOf(value=value):
            return f"dict[str, {py_type(value)}]"
        case Named(name=name):
            return name
        case UnionOf(members=members):
            out: list[str] = []
            literals = [_literal(m.value) for m in members if isinstance(m, Lit)]
            for member in members:
                if not isinstance(member, Lit):
                    out.append(py_type(member))
                elif literals:
                    out.append(f"Literal[{', '.join(literals)}]")
                    literals = []
            return " | ".join(out)
    raise AssertionError(node)  # pragma: no cover


def _literal(value: str | int | bool) -> str:
    if isinstance(value, str):
        return quote(value)
    return repr(value)


def quote(text: str) -> str:
    """Return a double-quoted string literal valid in Python and TypeScript."""
    quoted = json.dumps(text, ensure_ascii=False)
    try:
        quoted.encode("utf-8")
    except UnicodeEncodeError:
        quoted = json.dumps(text)
    return quoted


# A class-syntax TypedDict key would shadow these names for the annotations after it.
_ANNOTATION_NAMES = frozenset(
    ["JsonValue", "Literal", "None", "NotRequired", "bool", "dict", "float", "int", "list", "str"]
)


def _object(definition: ObjectDef, shadowing: frozenset[str] | set[str]) -> str:
    keys = [field.key for field in definition.fields]
    if all(is_py_name(key) and key not in shadowing for key in keys):
        lines = [f"class {definition.name}(TypedDict):"]
        if definition.doc:
            lines.append(docstring(definition.doc, _INDENT))
        lines.extend(
            f"{_INDENT}{f.key}: {_field_type(f)}{_comment(with_default(f))}"
            for f in definition.fields
        )
        return "\n".join(lines) + "\n"
    lines = [f"# {line}" if line else "#" for line in definition.doc.split("\n") if definition.doc]
    lines.append(f'{definition.name} = TypedDict("{definition.name}", {{')
    lines.extend(
        f"{_INDENT}{quote(f.key)}: {_field_type(f)},{_comment(with_default(f))}"
        for f in definition.fields
    )
    lines.append("})")
    return "\n".join(lines) + "\n"


def _field_type(field: Field) -> str:
    text = py_type(field.type)
    return text if field.required else f"NotRequired[{text}]"


def _comment(doc: str) -> str:
    return f" # {' '.join(doc.split())}" if doc else ""


def _alias(definition: AliasDef) -> str:
    lines = [f"{definition.name}: TypeAlias = {py_type(definition.target)}"]
    if definition.doc:
        lines.append(docstring(definition.doc, ""))
    return "\n".join(lines) + "\n"


def _tools(tools: tuple[ToolDef, ...], keyword: str) -> str:
    lines = []
    for tool in tools:
        head = f"{keyword} {tool.py_name}({_signature(tool)}) -> {py_type(tool.returns)}:"
        doc = _tool_doc(tool)
        lines.append(f"{head}\n{docstring(doc, _INDENT, compact=True)}" if doc else f"{head} ...")
    return "\n".join(lines) + "\n" if lines else ""


def _signature(tool: ToolDef) -> str:
    params = tool.params
    if params.args_type is not None:
        return f"**args: Unpack[{params.args_type}]"
    parts = []
    for field in params.fields:
        text = py_type(field.type)
        if field.required:
            parts.append(f"{field.key}: {text}")
        else:
            parts.append(f"{field.key}: {text} = {_default_literal(field) or '...'}")
    if parts:
        parts.insert(0, "*")
    if params.extra is not None:
        parts.append(f"**{_free_name(params.fields)}: {py_type(params.extra)}")
    return ", ".join(parts)


def _default_literal(field: Field) -> str | None:
    """The default as a Python literal, when it is a scalar the annotation accepts."""
    if field.default is None:
        return None
    value = json.loads(field.default)
    if not fits(value, field.type):
        return None
    if isinstance(value, str):
        return quote(value)
    if value is None or isinstance(value, bool | int | float):
        return repr(value)
    return None


def fits(value: object, node: TypeNode) -> bool:
    """Tell whether a JSON scalar is a value of the type (for a default in a signature)."""
    match node:
        case Prim(kind="json"):
            return True
        case Prim(kind="str"):
            return isinstance(value, str)
        case Prim(kind="int"):
            return isinstance(value, int) and not isinstance(value, bool)
        case Prim(kind="float"):
            return isinstance(value, int | float) and not isinstance(value, bool)
        case Prim(kind="bool"):
            return isinstance(value, bool)
        case Prim(kind="none"):
            return value is None
        case Lit(value=literal):
            return type(literal) is type(value) and literal == value
        case UnionOf(members=members):
            return any(fits(value, member) for member in members)
    return False


def with_default(field: Field) -> str:
    """A field's doc with its default, when the default cannot be shown otherwise."""
    if field.default is None or field.default == "null":
        return field.doc
    fact = f"(default {field.default})"
    return f"{field.doc} {fact}" if field.doc else fact


def _free_name(fields: tuple[Field, ...]) -> str:
    keys = {field.key for field in fields}
    name = "args"
    while name in keys:
        name += "_"
    return name


def _tool_doc(tool: ToolDef) -> str:
    lines = [tool.doc] if tool.doc else []
    for f in tool.params.fields:
        doc = f.doc if _default_literal(f) is not None or f.required else with_default(f)
        if doc:
            lines.append(f"{f.key}: {_one_line(doc)}")
    if tool.params.args_type is not None:
        lines.append(f'Pass arguments as **{{"key": value}} (keys of {tool.params.args_type}).')
    if tool.returns_doc:
        lines.append(f"Returns: {_one_line(tool.returns_doc)}")
    return "\n".join(lines).strip("\n")


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _indent_rest(text: str, indent: str) -> str:
    return text.replace("\n", "\n" + indent)


def docstring(text: str, indent: str, *, compact: bool = False) -> str:
    """Return text as a docstring at indent, escaped so any text stays one string literal.

    ``compact`` closes the docstring at the end of its last line, not on a line of its own.
    """
    body = text.replace("\\", "\\\\").replace('"""', '\\"\\"\\"')
    if body.endswith('"'):
        body = body[:-1] + '\\"'
    lines = body.split("\n")
    if len(lines) == 1:
        return f'{indent}"""{body}"""'
    out = [f'{indent}"""{lines[0]}']
    out.extend(f"{indent}{line}" if line else "" for line in lines[1:])
    if compact:
        out[-1] += '"""'
    else:
        out.append(f'{indent}"""')
    return "\n".join(out)
