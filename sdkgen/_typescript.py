"""Emit the TypeScript SDK text: `declare const tools` with interfaces and JSDoc."""

from __future__ import annotations

from sdkgen._names import is_ts_name
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
from sdkgen._python import quote, with_default

_HEADER = """\
/** Call `await tools.<name>({...})`; a failed call throws ToolCallError (.tool, .code, .message). */
type JsonValue = string | number | boolean | null | JsonValue[] | { [key: string]: JsonValue };
declare class ToolCallError extends Error {
  constructor(tool: string, message: string, code: string);
  readonly tool: string;
  readonly code: string;
}
"""
_PRIMS = {"str": "string", "int": "number", "float": "number", "bool": "boolean", "none": "null"}


def emit_typescript(sdk: Sdk) -> str:
    """Return the TypeScript declaration text for sdk."""
    parts = [_HEADER]
    if sdk.shared_docs:
        lines = ["Parameters documented once for every tool below:"]
        lines.extend(f"{key}: {' '.join(doc.split())}" for key, doc in sdk.shared_docs)
        parts.append("\n".join(_jsdoc("\n".join(lines), "")) + "\n")
    for definition in sdk.types:
        if isinstance(definition, ObjectDef):
            parts.append(_interface(definition))
        else:
            parts.append(_alias(definition))
    parts.append(_tools(sdk.tools))
    return "".join(parts)


def ts_type(node: TypeNode) -> str:
    """Return the TypeScript type for a type node."""
    match node:
        case Prim(kind="json"):
            return "JsonValue"
        case Prim(kind=kind):
            return _PRIMS[kind]
        case Lit(value=value):
            return quote(value) if isinstance(value, str) else str(value).lower()
        case ListOf(item=item):
            text = ts_type(item)
            return f"({text})[]" if isinstance(item, UnionOf) else f"{text}[]"
        case TupleOf(items=items, rest=rest):
            members = [ts_type(item) for item in items]
            if rest is not None:
                text = ts_type(rest)
                members.append(f"...({text})[]" if isinstance(rest, UnionOf) else f"...{text}[]")
            return f"[{', '.join(members)}]"
        case MapOf(value=value):
            return f"{{ [key: string]: {ts_type(value)} }}"
        case Named(name=name):
            return name
        case UnionOf(members=members):
            return " | ".join(dict.fromkeys(ts_type(m) for m in members))
    raise AssertionError(node)  # pragma: no cover


def _key(key: str) -> str:
    return key if is_ts_name(key) else quote(key)


def _jsdoc(text: str, indent: str) -> list[str]:
    if not text:
        return []
    lines = text.replace("*/", "*\\/").split("\n")
    if len(lines) == 1:
        return [f"{indent}/** {lines[0]} */"]
    return [f"{indent}/**", *(f"{indent} * {line}".rstrip() for line in lines), f"{indent} */"]


def _member(field: Field, indent: str) -> str:
    optional = "" if field.required else "?"
    return f"{indent}{_key(field.key)}{optional}: {ts_type(field.type)};"


def _interface(definition: ObjectDef) -> str:
    lines = _jsdoc(definition.doc, "")
    lines.append(f"interface {definition.name} {{")
    for field in definition.fields:
        doc = " ".join(with_default(field).split())
        lines.append(_member(field, "  ") + (f"  // {doc}" if doc else ""))
    lines.append("}")
    return "\n".join(lines) + "\n"


def _alias(definition: AliasDef) -> str:
    lines = _jsdoc(definition.doc, "")
    lines.append(f"type {definition.name} = {ts_type(definition.target)};")
    return "\n".join(lines) + "\n"


def _tools(tools: tuple[ToolDef, ...]) -> str:
    lines = ["declare const tools: {"]
    for tool in tools:
        lines.extend(_jsdoc(_tool_doc(tool), "  "))
        lines.append(f"  {_key(tool.name)}({_argument(tool)}): Promise<{ts_type(tool.returns)}>;")
    lines.append("};")
    return "\n".join(lines) + "\n"


def _argument(tool: ToolDef) -> str:
    params = tool.params
    if params.args_type is not None:
        return f"args: {params.args_type}"
    members = [_member(field, "")[:-1] for field in params.fields]
    if params.extra is not None:
        # Named members need not match the index signature's type: `unknown` then.
        extra = ts_type(params.extra) if not members else "unknown"
        members.append(f"[key: string]: {extra}")
    if not members:
        return "args?: Record<string, never>"
    optional = "" if any(field.required for field in params.fields) else "?"
    return f"args{optional}: {{ {'; '.join(members)} }}"


def _tool_doc(tool: ToolDef) -> str:
    lines = [tool.doc] if tool.doc else []
    for field in tool.params.fields:
        doc = with_default(field)
        if doc:
            lines.append(f"{field.key}: {' '.join(doc.split())}")
    if tool.returns_doc:
        lines.append(f"@returns {' '.join(tool.returns_doc.split())}")
    return "\n".join(lines)
