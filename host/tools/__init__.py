"""host.tools: the tool schema DSL, validation, registry and scopes, and the pipeline."""

from __future__ import annotations

from runtime.lowlevel import fixup_module_metadata as _fixup_module_metadata

from ._batch import ToolCallRequest, is_concurrency_safe, run_tool_calls
from ._call import Allow, Ask, Deny, Pause, PostDecision, ToolCall, ToolResultEvent
from ._config import RepeatReminderConfig, ToolsConfig
from ._definition import Output, ToolDefinition, ToolRunContext, define_tool, find_tools
from ._exceptions import (
    ReservedToolNameError,
    SchemaError,
    ScopeError,
    ToolDefinitionError,
    ToolError,
    ToolsError,
)
from ._hints import hint_to_node
from ._infer import FunctionTool, tool
from ._json import FrozenDict, FrozenList, canonical_json, freeze, thaw
from ._jsonschema import BareSchema, SchemaLimits
from ._plugins import RepeatToolReminder, timeout_policy
from ._present import (
    DiffCard,
    GenericCard,
    ReadCard,
    SearchCard,
    TerminalCard,
    WebCard,
    anthropic_tools,
    card_to_dict,
    openai_tools,
    present_call,
    present_result,
)
from ._registry import ToolRegistry, ToolSchema
from ._result import (
    ErrorCode,
    ToolFailure,
    ToolResult,
    WithContent,
    normalize_content,
    user_context,
)
from ._schema import (
    Array,
    Boolean,
    Integer,
    Json,
    Node,
    Null,
    Number,
    Object,
    OneOf,
    SchemaDSL,
    String,
    schema,
    to_json_schema,
)
from ._scope import RUN_CODE, Scope
from ._signal import AbortController, AbortSignal, RunSettled, fuse_signals
from ._validate import validate
from ._view import from_json_schema

__all__ = (
    "RUN_CODE",
    "AbortController",
    "AbortSignal",
    "Allow",
    "Array",
    "Ask",
    "BareSchema",
    "Boolean",
    "Deny",
    "DiffCard",
    "ErrorCode",
    "FrozenDict",
    "FrozenList",
    "FunctionTool",
    "GenericCard",
    "Integer",
    "Json",
    "Node",
    "Null",
    "Number",
    "Object",
    "OneOf",
    "Output",
    "Pause",
    "PostDecision",
    "ReadCard",
    "RepeatReminderConfig",
    "RepeatToolReminder",
    "ReservedToolNameError",
    "RunSettled",
    "SchemaDSL",
    "SchemaError",
    "SchemaLimits",
    "Scope",
    "ScopeError",
    "SearchCard",
    "String",
    "TerminalCard",
    "ToolCall",
    "ToolCallRequest",
    "ToolDefinition",
    "ToolDefinitionError",
    "ToolError",
    "ToolFailure",
    "ToolRegistry",
    "ToolResult",
    "ToolResultEvent",
    "ToolRunContext",
    "ToolSchema",
    "ToolsConfig",
    "ToolsError",
    "WebCard",
    "WithContent",
    "anthropic_tools",
    "canonical_json",
    "card_to_dict",
    "define_tool",
    "find_tools",
    "freeze",
    "from_json_schema",
    "fuse_signals",
    "hint_to_node",
    "is_concurrency_safe",
    "normalize_content",
    "openai_tools",
    "present_call",
    "present_result",
    "run_tool_calls",
    "schema",
    "thaw",
    "timeout_policy",
    "to_json_schema",
    "tool",
    "user_context",
    "validate",
)

_fixup_module_metadata(__name__, globals())
