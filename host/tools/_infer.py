"""The ``@tool`` decorator: a tool definition inferred from a function's signature and hints."""

from __future__ import annotations

import dataclasses
import inspect
import re
import types
import typing
from collections.abc import Callable, Mapping
from typing import Any, Literal, NotRequired, Required, get_args, get_origin, overload

import msgspec

from ._definition import ConcurrencySafe, Output, Render, ToolDefinition, ToolRunContext
from ._exceptions import SchemaError, ToolDefinitionError
from ._schema import (
    MISSING,
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

__all__ = ("FunctionTool", "hint_to_node", "tool")

_SECTION = re.compile(
    r"^\s*(Args|Arguments|Parameters|Returns|Raises|Yields|Example|Examples):\s*$"
)
_ARG_LINE = re.compile(r"^\s*\*{0,2}(\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$")


class FunctionTool(ToolDefinition):
    """A tool defined by ``@tool``: a ``ToolDefinition`` that stays callable as the function."""

    __wrapped__: Callable[..., Any]
    __name__: str
    __qualname__: str

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Call the original function."""
        return self.__wrapped__(*args, **kwargs)


def _parse_docstring(doc: str | None) -> tuple[str, dict[str, str]]:
    if not doc:
        return "", {}
    summary: list[str] = []
    params: dict[str, str] = {}
    section: str | None = None
    current: str | None = None
    for line in inspect.cleandoc(doc).splitlines():
        header = _SECTION.match(line)
        if header:
            section, current = header.group(1), None
            continue
        if section is None:
            summary.append(line)
        elif section in ("Args", "Arguments", "Parameters") and line.strip():
            indented = line.startswith((" ", "\t"))
            match = _ARG_LINE.match(line)
            if match and (current is None or len(line) - len(line.lstrip()) <= 4):
                current = match.group(1)
                params[current] = match.group(2).strip()
            elif current is not None and indented:
                params[current] = (params[current] + " " + line.strip()).strip()
    return "\n".join(summary).strip(), params


def _apply_meta(node: Node, metadata: tuple[Any, ...]) -> Node:
    changes: dict[str, Any] = {}
    for meta in metadata:
        if isinstance(meta, str):
            changes["description"] = meta
        elif isinstance(meta, msgspec.Meta):
            if meta.description is not None:
                changes["description"] = meta.description
            bounds = {"ge": "minimum", "le": "maximum", "gt": "exclusive_minimum"}
            bounds["lt"] = "exclusive_maximum"
            for key, target in bounds.items():
                if getattr(meta, key) is not None:
                    if not isinstance(node, Number | Integer):
                        raise SchemaError(f"{key} applies to numbers, not {type(node).__name__}")
                    changes[target] = getattr(meta, key)
            for key in ("min_length", "max_length"):
                if getattr(meta, key) is not None:
                    if isinstance(node, String):
                        changes[key] = getattr(meta, key)
                    elif isinstance(node, Array):
                        changes[key.replace("length", "items")] = getattr(meta, key)
                    else:
                        raise SchemaError(f"{key} applies to strings and arrays")
            if meta.pattern is not None:
                if not isinstance(node, String):
                    raise SchemaError("pattern applies to strings")
                changes["pattern"] = meta.pattern
    return node if not changes else _replace(node, changes)


def _replace(node: Node, changes: dict[str, Any]) -> Node:
    return dataclasses.replace(node, **changes)


def _literal(values: tuple[Any, ...]) -> Node:
    groups: dict[type[Node], list[Any]] = {}
    for value in values:
        if value is None:
            groups.setdefault(Null, []).append(value)
        elif isinstance(value, bool):
            groups.setdefault(Boolean, []).append(value)
        elif isinstance(value, int):
            groups.setdefault(Integer, []).append(value)
        elif isinstance(value, str):
            groups.setdefault(String, []).append(value)
        else:
            raise SchemaError(f"Literal values must be str, int, bool or None, got {value!r}")
    nodes: list[Node] = []
    for kind, items in groups.items():
        if kind is Null:
            nodes.append(Null())
        elif len(items) == 1:
            nodes.append(kind(const=items[0]))  # type: ignore[call-arg]
        else:
            nodes.append(kind(enum=tuple(items)))  # type: ignore[call-arg]
    return nodes[0] if len(nodes) == 1 else OneOf(options=tuple(nodes))


def _typed_dict(hint: Any, seen: frozenset[int]) -> Object:
    if id(hint) in seen:
        raise SchemaError(f"recursive TypedDict {hint.__name__} is not supported")
    hints = typing.get_type_hints(hint, include_extras=True)
    required_keys = hint.__required_keys__
    props: dict[str, Node] = {}
    for key, sub in hints.items():
        node = hint_to_node(sub, _seen=seen | {id(hint)})
        # With postponed annotations, __required_keys__ misses NotRequired[...]: use the hint.
        wrapper = get_origin(_strip_annotated(sub))
        needed = wrapper is Required or (wrapper is not NotRequired and key in required_keys)
        props[key] = _replace(node, {"required": needed})
    doc = inspect.getdoc(hint)
    return schema.object(
        props, additional_properties=False, description=_parse_docstring(doc)[0] or None
    )


def _strip_annotated(hint: Any) -> Any:
    while get_origin(hint) is typing.Annotated:
        hint = get_args(hint)[0]
    return hint


def hint_to_node(hint: Any, *, _seen: frozenset[int] = frozenset()) -> Node:
    """Translate a type hint into a schema node (raises ``SchemaError`` when unsupported)."""
    origin = get_origin(hint)
    if origin is typing.Annotated:
        base, *metadata = get_args(hint)
        return _apply_meta(hint_to_node(base, _seen=_seen), tuple(metadata))
    if origin in (Required, NotRequired):
        return hint_to_node(get_args(hint)[0], _seen=_seen)
    simple: dict[Any, Callable[[], Node]] = {
        str: String,
        int: Integer,
        float: Number,
        bool: Boolean,
        None: Null,
        type(None): Null,
        Any: Json,
        object: Json,
        list: Array,
        dict: lambda: schema.object({}, additional_properties=True),
    }
    if hint in simple:
        return simple[hint]()
    if origin is Literal:
        return _literal(get_args(hint))
    if origin in (types.UnionType, typing.Union):
        members = list(get_args(hint))
        if int in members and float in members:
            members.remove(int)
        nodes = tuple(hint_to_node(member, _seen=_seen) for member in members)
        return nodes[0] if len(nodes) == 1 else OneOf(options=nodes)
    if origin is list:
        (item,) = get_args(hint)
        return Array(items=hint_to_node(item, _seen=_seen))
    if origin is dict:
        key, value = get_args(hint)
        if key is not str:
            raise SchemaError(f"dict keys must be str, got {key!r}")
        return schema.object({}, additional_properties=hint_to_node(value, _seen=_seen))
    if typing.is_typeddict(hint):
        return _typed_dict(hint, _seen)
    raise SchemaError(f"unsupported type hint {hint!r}")


def _is_context(hint: Any) -> bool:
    if hint is ToolRunContext:
        return True
    return get_origin(hint) in (types.UnionType, typing.Union) and ToolRunContext in get_args(hint)


def _json_default(value: Any) -> Any:
    if value is None or isinstance(value, bool | int | float | str):
        return value
    return MISSING


def _build(fn: Callable[..., Any], options: dict[str, Any]) -> FunctionTool:
    name = options.pop("name") or fn.__name__
    try:
        hints = typing.get_type_hints(fn, include_extras=True)
    except Exception as exc:
        raise ToolDefinitionError(f"{name}: cannot resolve type hints: {exc}") from exc
    summary, param_docs = _parse_docstring(fn.__doc__)
    props: dict[str, Node] = {}
    context_param: str | None = None
    for param in inspect.signature(fn).parameters.values():
        hint = hints.get(param.name, Any)
        if param.kind is param.KEYWORD_ONLY and _is_context(hint):
            context_param = param.name
            continue
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD, param.POSITIONAL_ONLY):
            raise ToolDefinitionError(f"{name}: parameter {param.name!r} cannot be a tool argument")
        try:
            node = hint_to_node(hint)
        except SchemaError as exc:
            raise ToolDefinitionError(f"{name}: parameter {param.name!r}: {exc}") from exc
        changes: dict[str, Any] = {"required": param.default is param.empty}
        if param.default is not param.empty:
            changes["default"] = _json_default(param.default)
        if node.description is None and param.name in param_docs:
            changes["description"] = param_docs[param.name]
        props[param.name] = _replace(node, changes)
    output: Output | None = None
    if "return" in hints and hints["return"] is not Any:
        try:
            out_node = hint_to_node(hints["return"])
        except SchemaError as exc:
            raise ToolDefinitionError(f"{name}: return annotation: {exc}") from exc
        render: Render | None = options.pop("render", None)
        meta: Render | None = options.pop("presentation_meta", None)
        output = (
            Output(out_node, render, meta) if render else Output(out_node, presentation_meta=meta)
        )
    else:
        options.pop("render", None)
        options.pop("presentation_meta", None)
    execute = _executor(fn, context_param)
    definition = FunctionTool(
        name=name,
        description=options.pop("description") or summary,
        parameters=schema.object(props, additional_properties=False),
        execute=execute,
        output=output,
        **options,
    )
    for attr in ("__module__", "__name__", "__qualname__", "__doc__"):
        object.__setattr__(definition, attr, getattr(fn, attr, None))
    object.__setattr__(definition, "__wrapped__", fn)
    return definition


def _executor(fn: Callable[..., Any], context_param: str | None) -> Callable[..., Any]:
    if inspect.iscoroutinefunction(fn):

        async def run_async(args: Mapping[str, Any], ctx: ToolRunContext) -> Any:
            extra = {context_param: ctx} if context_param else {}
            return await fn(**args, **extra)

        return run_async

    def run_sync(args: Mapping[str, Any], ctx: ToolRunContext) -> Any:
        extra = {context_param: ctx} if context_param else {}
        return fn(**args, **extra)

    return run_sync


@overload
def tool(fn: Callable[..., Any], /) -> FunctionTool: ...
@overload
def tool(
    *,
    name: str | None = None,
    description: str | None = None,
    timeout_ms: int | None = None,
    concurrency_safe: ConcurrencySafe = False,
    render: Render | None = None,
    presentation_meta: Render | None = None,
    finalize_content: Callable[[Any], Any] | None = None,
    present_call: Callable[[Any], Any] | None = None,
    present_result: Callable[[Any, Mapping[str, Any]], Any] | None = None,
) -> Callable[[Callable[..., Any]], FunctionTool]: ...
def tool(
    fn: Callable[..., Any] | None = None, /, **options: Any
) -> FunctionTool | Callable[[Callable[..., Any]], FunctionTool]:
    """Turn a sync or async function into a tool; parameters and output come from its hints."""
    options.setdefault("name", None)
    options.setdefault("description", None)
    if fn is not None:
        return _build(fn, dict(options))

    def decorate(func: Callable[..., Any]) -> FunctionTool:
        return _build(func, dict(options))

    return decorate
