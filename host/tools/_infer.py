"""The ``@tool`` decorator: a tool definition inferred from a function's signature and hints."""

from __future__ import annotations

import dataclasses
import enum
import inspect
import re
import sys
import types
import typing
from collections.abc import Callable, Mapping
from typing import Any, get_args, get_origin, overload

from ._definition import ConcurrencySafe, Output, Render, ToolDefinition, ToolRunContext
from ._exceptions import SchemaError, ToolDefinitionError
from ._hints import dump_value, hint_converter, hint_to_node, needs_dump
from ._schema import MISSING, Node, schema

__all__ = ("FunctionTool", "tool")

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


def _is_context(hint: Any) -> bool:
    if hint is ToolRunContext:
        return True
    return get_origin(hint) in (types.UnionType, typing.Union) and ToolRunContext in get_args(hint)


def _json_default(value: Any) -> Any:
    if isinstance(value, enum.Enum):
        value = value.value
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
    converters: dict[str, Callable[[Any], Any]] = {}
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
        convert = hint_converter(hint)
        if convert is not None:
            converters[param.name] = convert
        changes: dict[str, Any] = {"required": param.default is param.empty}
        if param.default is not param.empty:
            changes["default"] = _json_default(param.default)
        if node.description is None and param.name in param_docs:
            changes["description"] = param_docs[param.name]
        props[param.name] = dataclasses.replace(node, **changes)
    output: Output | None = None
    dump = False
    if "return" in hints and hints["return"] is not Any:
        try:
            out_node = _output_node(hints["return"])
        except SchemaError as exc:
            raise ToolDefinitionError(f"{name}: return annotation: {exc}") from exc
        dump = needs_dump(hints["return"])
        render: Render | None = options.pop("render", None)
        meta: Render | None = options.pop("presentation_meta", None)
        output = (
            Output(out_node, render, meta) if render else Output(out_node, presentation_meta=meta)
        )
    else:
        options.pop("render", None)
        options.pop("presentation_meta", None)
    execute = _executor(fn, context_param, converters, dump)
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


def _output_node(hint: Any) -> Node:
    """A return annotation's schema; a pydantic model's in its serialization mode."""
    base = hint
    while get_origin(base) is typing.Annotated:
        base = get_args(base)[0]
    module = sys.modules.get("pydantic")
    model = getattr(module, "BaseModel", None)
    if model is not None and isinstance(base, type) and issubclass(base, model):
        from ._view import from_json_schema

        return from_json_schema(base.model_json_schema(mode="serialization"))  # type: ignore[attr-defined]
    return hint_to_node(hint)


def _executor(
    fn: Callable[..., Any],
    context_param: str | None,
    converters: Mapping[str, Callable[[Any], Any]],
    dump: bool,
) -> Callable[..., Any]:
    def arguments(args: Mapping[str, Any], ctx: ToolRunContext) -> dict[str, Any]:
        # Valid JSON in, the annotated Python values out (models, dataclasses, enums, dates).
        out = (
            {
                k: converters[k](v) if k in converters and v is not None else v
                for k, v in args.items()
            }
            if converters
            else dict(args)
        )
        if context_param:
            out[context_param] = ctx
        return out

    if inspect.iscoroutinefunction(fn):

        async def run_async(args: Mapping[str, Any], ctx: ToolRunContext) -> Any:
            value = await fn(**arguments(args, ctx))
            return dump_value(value) if dump else value

        return run_async

    def run_sync(args: Mapping[str, Any], ctx: ToolRunContext) -> Any:
        value = fn(**arguments(args, ctx))
        return dump_value(value) if dump else value

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
