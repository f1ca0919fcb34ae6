"""dsh_code: the one import home of dsh-code (``from dsh_code import SubprocessRuntime, tool``).

Every name is imported on first use (PEP 562): ``import dsh_code`` loads nothing but this
module, and a framework only when its adapter is used. The names live in the repository's
packages (``runtime``, ``host.*``, ``sdkgen``), which stay importable; this module re-exports
them, the same objects.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from host.adapters import (
        shared_runtime,
    )
    from host.adapters.langgraph import (
        dsh_eval_fn,
    )
    from host.adapters.pydantic_ai import (
        DshCodeToolset,
    )
    from host.adapters.smolagents import (
        DshExecutor,
    )
    from host.cluster import (
        ClusterError,
        RayRuntime,
    )
    from host.codemode import (
        DISPATCH_EVENT,
        DISPATCH_START_EVENT,
        INSTRUCTIONS,
        PERSISTENT_NOTE,
        SYNC_INSTRUCTIONS,
        CodeMode,
        CodeModeConfig,
        CodeModeSession,
        CodeRunFailed,
        SdkSection,
        SubCallScheduler,
    )
    from host.mcp import (
        DshSandboxProvider,
        McpError,
        McpServeConfig,
        McpServers,
        McpServerSpec,
        elicitation_ask_handler,
    )
    from host.sandbox import (
        Session,
        SubprocessRuntime,
        TemplateStartError,
    )
    from host.tools import (
        RUN_CODE,
        AbortController,
        AbortSignal,
        Allow,
        Array,
        Ask,
        BareSchema,
        Boolean,
        Deny,
        DiffCard,
        ErrorCode,
        FrozenDict,
        FrozenList,
        FunctionTool,
        GenericCard,
        Integer,
        Json,
        Node,
        Null,
        Number,
        Object,
        OneOf,
        Output,
        PostDecision,
        ReadCard,
        RepeatReminderConfig,
        RepeatToolReminder,
        ReservedToolNameError,
        SchemaDSL,
        SchemaError,
        SchemaLimits,
        Scope,
        ScopeError,
        SearchCard,
        String,
        TerminalCard,
        ToolCall,
        ToolCallRequest,
        ToolDefinition,
        ToolDefinitionError,
        ToolError,
        ToolFailure,
        ToolRegistry,
        ToolResult,
        ToolResultEvent,
        ToolRunContext,
        ToolSchema,
        ToolsConfig,
        ToolsError,
        WebCard,
        WithContent,
        anthropic_tools,
        canonical_json,
        card_to_dict,
        define_tool,
        find_tools,
        freeze,
        from_json_schema,
        fuse_signals,
        hint_to_node,
        is_concurrency_safe,
        normalize_content,
        openai_tools,
        present_call,
        present_result,
        run_tool_calls,
        schema,
        thaw,
        timeout_policy,
        to_json_schema,
        tool,
        user_context,
        validate,
    )
    from runtime import (
        FAILURE_KINDS,
        AbortSignalLike,
        Binding,
        CallInfo,
        CallStyle,
        CodeRuntime,
        FailureKind,
        Limits,
        RunError,
        RunRequest,
        RunResult,
        RunStats,
        RuntimeClosedError,
        RuntimeEnvironmentError,
        RuntimeUsageError,
        ToolCallError,
        current_call,
        json_problem,
    )
    from runtime.testing import (
        InProcessRuntime,
    )
    from sdkgen import (
        python_sdk,
        typescript_sdk,
    )

__all__ = (
    "DISPATCH_EVENT",
    "DISPATCH_START_EVENT",
    "FAILURE_KINDS",
    "INSTRUCTIONS",
    "PERSISTENT_NOTE",
    "RUN_CODE",
    "SYNC_INSTRUCTIONS",
    "AbortController",
    "AbortSignal",
    "AbortSignalLike",
    "Allow",
    "Array",
    "Ask",
    "BareSchema",
    "Binding",
    "Boolean",
    "CallInfo",
    "CallStyle",
    "ClusterError",
    "CodeMode",
    "CodeModeConfig",
    "CodeModeSession",
    "CodeRunFailed",
    "CodeRuntime",
    "Deny",
    "DiffCard",
    "DshCodeToolset",
    "DshExecutor",
    "DshSandboxProvider",
    "ErrorCode",
    "FailureKind",
    "FrozenDict",
    "FrozenList",
    "FunctionTool",
    "GenericCard",
    "InProcessRuntime",
    "Integer",
    "Json",
    "Limits",
    "McpError",
    "McpServeConfig",
    "McpServerSpec",
    "McpServers",
    "Node",
    "Null",
    "Number",
    "Object",
    "OneOf",
    "Output",
    "PostDecision",
    "RayRuntime",
    "ReadCard",
    "RepeatReminderConfig",
    "RepeatToolReminder",
    "ReservedToolNameError",
    "RunError",
    "RunRequest",
    "RunResult",
    "RunStats",
    "RuntimeClosedError",
    "RuntimeEnvironmentError",
    "RuntimeUsageError",
    "SchemaDSL",
    "SchemaError",
    "SchemaLimits",
    "Scope",
    "ScopeError",
    "SdkSection",
    "SearchCard",
    "Session",
    "String",
    "SubCallScheduler",
    "SubprocessRuntime",
    "TemplateStartError",
    "TerminalCard",
    "ToolCall",
    "ToolCallError",
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
    "current_call",
    "define_tool",
    "dsh_eval_fn",
    "elicitation_ask_handler",
    "find_tools",
    "freeze",
    "from_json_schema",
    "fuse_signals",
    "hint_to_node",
    "is_concurrency_safe",
    "json_problem",
    "normalize_content",
    "openai_tools",
    "present_call",
    "present_result",
    "python_sdk",
    "run_tool_calls",
    "schema",
    "shared_runtime",
    "thaw",
    "timeout_policy",
    "to_json_schema",
    "tool",
    "typescript_sdk",
    "user_context",
    "validate",
)

#: Each name's public module: the names it gives, space-separated.
_NAMES_BY_HOME = {
    "runtime": (
        "FAILURE_KINDS AbortSignalLike Binding CallInfo CallStyle CodeRuntime FailureKind "
        "Limits RunError RunRequest RunResult RunStats RuntimeClosedError "
        "RuntimeEnvironmentError RuntimeUsageError ToolCallError current_call json_problem"
    ),
    "host.sandbox": "Session SubprocessRuntime TemplateStartError",
    "host.codemode": (
        "DISPATCH_EVENT DISPATCH_START_EVENT INSTRUCTIONS PERSISTENT_NOTE SYNC_INSTRUCTIONS "
        "CodeMode CodeModeConfig CodeModeSession CodeRunFailed SdkSection SubCallScheduler"
    ),
    "host.tools": (
        "RUN_CODE AbortController AbortSignal Allow Array Ask BareSchema Boolean Deny "
        "DiffCard ErrorCode FrozenDict FrozenList FunctionTool GenericCard Integer Json Node "
        "Null Number Object OneOf Output PostDecision ReadCard RepeatReminderConfig "
        "RepeatToolReminder ReservedToolNameError SchemaDSL SchemaError SchemaLimits Scope "
        "ScopeError SearchCard String TerminalCard ToolCall ToolCallRequest ToolDefinition "
        "ToolDefinitionError ToolError ToolFailure ToolRegistry ToolResult ToolResultEvent "
        "ToolRunContext ToolSchema ToolsConfig ToolsError WebCard WithContent anthropic_tools "
        "canonical_json card_to_dict define_tool find_tools freeze from_json_schema "
        "fuse_signals hint_to_node is_concurrency_safe normalize_content openai_tools "
        "present_call present_result run_tool_calls schema thaw timeout_policy to_json_schema "
        "tool user_context validate"
    ),
    "runtime.testing": "InProcessRuntime",
    "host.adapters": "shared_runtime",
    "host.adapters.smolagents": "DshExecutor",
    "host.adapters.pydantic_ai": "DshCodeToolset",
    "host.adapters.langgraph": "dsh_eval_fn",
    "host.mcp": (
        "DshSandboxProvider McpError McpServeConfig McpServerSpec McpServers "
        "elicitation_ask_handler"
    ),
    "host.cluster": "ClusterError RayRuntime",
    "sdkgen": "python_sdk typescript_sdk",
}
_HOMES = {name: home for home, names in _NAMES_BY_HOME.items() for name in names.split()}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'dsh_code' has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
