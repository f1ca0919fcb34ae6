"""Tool definitions: ``ToolDefinition``, its ``Output``, the run context and ``define_tool``."""

from __future__ import annotations

import inspect
import re
import types
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

from ._exceptions import SchemaError, ToolDefinitionError
from ._json import canonical_json
from ._jsonschema import SchemaLimits
from ._result import user_context
from ._schema import Json, Node, Object, schema
from ._signal import AbortSignal
from ._view import from_json_schema

if TYPE_CHECKING:
    from ._result import ToolResult

__all__ = (
    "Output",
    "ToolDefinition",
    "ToolRunContext",
    "default_render",
    "define_tool",
    "find_tools",
)

_NAME: Final = re.compile(r"[A-Za-z0-9_-]{1,64}\Z")

Render = Callable[[Any, Any], Any]
ConcurrencySafe = bool | Callable[[Any], Any]


def default_render(_args: Any, value: Any) -> str:
    """Render a value as text: strings as they are, anything else as JSON."""
    return value if isinstance(value, str) else canonical_json(value, sort_keys=False)


@dataclass(frozen=True, slots=True)
class Output:
    """A tool's output contract: the value ``schema``, ``render`` and ``presentation_meta``."""

    schema: Node
    render: Render = default_render
    presentation_meta: Render | None = None


class ToolRunContext:
    """What a running tool body receives: the read-only signal, ids, and ``defer_context``."""

    __slots__ = ("_deferred", "args", "call_id", "name", "scope", "signal")

    def __init__(
        self, *, name: str, call_id: str | None, scope: Any, signal: AbortSignal, args: Any
    ) -> None:
        self.name = name
        self.call_id = call_id
        self.scope = scope
        self.signal = signal
        self.args = args
        self._deferred: list[Any] = []

    def defer_context(self, context: Any) -> None:
        """Keep a context (text, parts or a user message) for the final result, whatever happens."""
        self._deferred.append(user_context(context))


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolDefinition:
    """A tool: name, description, parameter schema, output contract and executor.

    ``execute(args, ctx)`` may be sync (run in a worker thread) or async.
    """

    name: str
    description: str
    parameters: Object
    execute: Callable[[Any, ToolRunContext], Any]
    output: Output | None = None
    timeout_ms: int | None = None
    concurrency_safe: ConcurrencySafe = False
    validate_args: bool = True
    finalize_content: Callable[[ToolResult], Any] | None = None
    present_call: Callable[[Any], Any] | None = None
    present_result: Callable[[Any, Mapping[str, Any]], Any] | None = None
    is_async: bool = field(default=False, compare=False)

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not _NAME.match(self.name):
            raise ToolDefinitionError(
                f"tool name {self.name!r} must be 1-64 letters, digits, '_' or '-'"
            )
        if not isinstance(self.parameters, Object):
            raise ToolDefinitionError(f"{self.name}: parameters must be an object schema")
        if self.timeout_ms is not None and (
            isinstance(self.timeout_ms, bool)
            or not isinstance(self.timeout_ms, int)
            or self.timeout_ms <= 0
        ):
            raise ToolDefinitionError(f"{self.name}: timeout_ms must be a positive int")
        if not callable(self.execute):
            raise ToolDefinitionError(f"{self.name}: execute must be callable")
        object.__setattr__(self, "is_async", inspect.iscoroutinefunction(self.execute))

    @property
    def output_schema(self) -> Node:
        """The node a returned value is validated against (any JSON when none is declared)."""
        return _ANY if self.output is None else self.output.schema


_ANY: Final = Json()


def _parameters(parameters: Any, name: str, limits: SchemaLimits | None) -> Object:
    if isinstance(parameters, Object):
        return parameters
    if isinstance(parameters, Node):
        raise ToolDefinitionError(f"{name}: parameters must be an object schema")
    if isinstance(parameters, Mapping):
        if all(isinstance(node, Node) for node in parameters.values()) and not (
            "type" in parameters or "properties" in parameters
        ):
            return schema.root(parameters)
        try:
            node = from_json_schema(parameters, limits=limits)
        except SchemaError as exc:
            raise ToolDefinitionError(f"{name}: parameters: {exc}") from exc
        if not isinstance(node, Object):
            raise ToolDefinitionError(f"{name}: parameters must be an object schema")
        return node
    raise ToolDefinitionError(f"{name}: parameters must be a mapping of nodes or a schema")


def _output(output: Any, name: str, limits: SchemaLimits | None) -> Output | None:
    if output is None or isinstance(output, Output):
        return output
    if isinstance(output, Node):
        return Output(output)
    if isinstance(output, Mapping) and "schema" in output:
        node = output["schema"]
        if not isinstance(node, Node):
            try:
                node = from_json_schema(node, limits=limits)
            except SchemaError as exc:
                raise ToolDefinitionError(f"{name}: output schema: {exc}") from exc
        return Output(
            node,
            output.get("render") or default_render,
            output.get("presentation_meta"),
        )
    raise ToolDefinitionError(f"{name}: output must be an Output or {{schema, render?, ...}}")


def define_tool(
    *,
    name: str,
    description: str,
    parameters: Any,
    execute: Callable[[Any, ToolRunContext], Any],
    output: Any = None,
    timeout_ms: int | None = None,
    concurrency_safe: ConcurrencySafe = False,
    validate_args: bool = True,
    finalize_content: Callable[[ToolResult], Any] | None = None,
    present_call: Callable[[Any], Any] | None = None,
    present_result: Callable[[Any, Mapping[str, Any]], Any] | None = None,
    schema_limits: SchemaLimits | None = None,
) -> ToolDefinition:
    """Define a tool with the explicit DSL; ``parameters`` is a mapping of nodes (the implicit
    root, which takes no other keys), an ``schema.object(...)`` node or a bare JSON Schema.

    A bare JSON Schema (draft 4 to 2020-12) is kept as given and validates with a
    standard-conforming validator, within ``schema_limits``. Defaults declared in the schema
    are not applied to the arguments.
    """
    return ToolDefinition(
        name=name,
        description=description,
        parameters=_parameters(parameters, name, schema_limits),
        execute=execute,
        output=_output(output, name, schema_limits),
        timeout_ms=timeout_ms,
        concurrency_safe=concurrency_safe,
        validate_args=validate_args,
        finalize_content=finalize_content,
        present_call=present_call,
        present_result=present_result,
    )


def find_tools(namespace: Mapping[str, Any] | types.ModuleType) -> list[ToolDefinition]:
    """The tool definitions among a module's (or mapping's) top-level values, sorted by name."""
    values = vars(namespace) if isinstance(namespace, types.ModuleType) else namespace
    found = {id(v): v for v in values.values() if isinstance(v, ToolDefinition)}
    return sorted(found.values(), key=lambda definition: definition.name)
