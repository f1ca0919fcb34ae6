"""dsh_code: the one import home of dsh-code (``from dsh_code import SubprocessRuntime, tool``).

Every name is imported on first use (PEP 562): ``import dsh_code`` loads nothing but this
module, and a framework only when its adapter is used. The names live in the repository's
packages (``runtime``, ``host.*``, ``sdkgen``), which stay importable; this module re-exports
them, the same objects. Written by ``scripts/gen_dsh_code.py``: do not edit by hand.
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
        MIN_MODEL_OUTPUT_BYTES,
        PERSISTENT_NOTE,
        SYNC_INSTRUCTIONS,
        TYPESCRIPT_INSTRUCTIONS,
        CodeMode,
        CodeModeConfig,
        CodeModeSession,
        CodeRunFailed,
        ModelText,
        SdkSection,
        SubCallScheduler,
        cut_to_budget,
        failure_text,
        left_out_line,
        success_text,
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
        TypeScriptRuntime,
        deno_binary,
    )
    from host.telemetry import (
        TelemetrySettings,
        configure,
        trace_run,
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
        Pause,
        PostDecision,
        ReadCard,
        RepeatReminderConfig,
        RepeatToolReminder,
        ReservedToolNameError,
        RunSettled,
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
        CallFailure,
        CallInfo,
        CallStyle,
        CodeRuntime,
        Decision,
        FailureKind,
        HoldCall,
        Journal,
        JournalCall,
        JournalError,
        Limits,
        PendingCall,
        RunError,
        RunRequest,
        RunResult,
        RunStats,
        RuntimeClosedError,
        RuntimeEnvironmentError,
        RuntimeUsageError,
        Seeds,
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
    "MIN_MODEL_OUTPUT_BYTES",
    "PERSISTENT_NOTE",
    "RUN_CODE",
    "SYNC_INSTRUCTIONS",
    "TYPESCRIPT_INSTRUCTIONS",
    "AbortController",
    "AbortSignal",
    "AbortSignalLike",
    "Allow",
    "Array",
    "Ask",
    "BareSchema",
    "Binding",
    "Boolean",
    "CallFailure",
    "CallInfo",
    "CallStyle",
    "ClusterError",
    "CodeMode",
    "CodeModeConfig",
    "CodeModeSession",
    "CodeRunFailed",
    "CodeRuntime",
    "Decision",
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
    "HoldCall",
    "InProcessRuntime",
    "Integer",
    "Journal",
    "JournalCall",
    "JournalError",
    "Json",
    "Limits",
    "McpError",
    "McpServeConfig",
    "McpServerSpec",
    "McpServers",
    "ModelText",
    "Node",
    "Null",
    "Number",
    "Object",
    "OneOf",
    "Output",
    "Pause",
    "PendingCall",
    "PostDecision",
    "RayRuntime",
    "ReadCard",
    "RepeatReminderConfig",
    "RepeatToolReminder",
    "ReservedToolNameError",
    "RunError",
    "RunRequest",
    "RunResult",
    "RunSettled",
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
    "Seeds",
    "Session",
    "String",
    "SubCallScheduler",
    "SubprocessRuntime",
    "TelemetrySettings",
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
    "TypeScriptRuntime",
    "WebCard",
    "WithContent",
    "anthropic_tools",
    "canonical_json",
    "card_to_dict",
    "configure",
    "current_call",
    "cut_to_budget",
    "define_tool",
    "deno_binary",
    "dsh_eval_fn",
    "elicitation_ask_handler",
    "failure_text",
    "find_tools",
    "freeze",
    "from_json_schema",
    "fuse_signals",
    "hint_to_node",
    "is_concurrency_safe",
    "json_problem",
    "left_out_line",
    "normalize_content",
    "openai_tools",
    "present_call",
    "present_result",
    "python_sdk",
    "run_tool_calls",
    "schema",
    "shared_runtime",
    "success_text",
    "thaw",
    "timeout_policy",
    "to_json_schema",
    "tool",
    "trace_run",
    "typescript_sdk",
    "user_context",
    "validate",
)

#: Each name's public module: the names it gives, space-separated.
_NAMES_BY_HOME = {
    "runtime": (
        "FAILURE_KINDS AbortSignalLike Binding CallFailure CallInfo CallStyle CodeRuntime "
        "Decision FailureKind HoldCall Journal JournalCall JournalError Limits PendingCall "
        "RunError RunRequest RunResult RunStats RuntimeClosedError RuntimeEnvironmentError "
        "RuntimeUsageError Seeds ToolCallError current_call json_problem"
    ),
    "host.sandbox": "Session SubprocessRuntime TemplateStartError TypeScriptRuntime deno_binary",
    "host.codemode": (
        "DISPATCH_EVENT DISPATCH_START_EVENT INSTRUCTIONS MIN_MODEL_OUTPUT_BYTES "
        "PERSISTENT_NOTE SYNC_INSTRUCTIONS TYPESCRIPT_INSTRUCTIONS CodeMode CodeModeConfig "
        "CodeModeSession CodeRunFailed ModelText SdkSection SubCallScheduler cut_to_budget "
        "failure_text left_out_line success_text"
    ),
    "host.tools": (
        "RUN_CODE AbortController AbortSignal Allow Array Ask BareSchema Boolean Deny "
        "DiffCard ErrorCode FrozenDict FrozenList FunctionTool GenericCard Integer Json Node "
        "Null Number Object OneOf Output Pause PostDecision ReadCard RepeatReminderConfig "
        "RepeatToolReminder ReservedToolNameError RunSettled SchemaDSL SchemaError "
        "SchemaLimits Scope ScopeError SearchCard String TerminalCard ToolCall "
        "ToolCallRequest ToolDefinition ToolDefinitionError ToolError ToolFailure "
        "ToolRegistry ToolResult ToolResultEvent ToolRunContext ToolSchema ToolsConfig "
        "ToolsError WebCard WithContent anthropic_tools canonical_json card_to_dict "
        "define_tool find_tools freeze from_json_schema fuse_signals hint_to_node "
        "is_concurrency_safe normalize_content openai_tools present_call present_result "
        "run_tool_calls schema thaw timeout_policy to_json_schema tool user_context validate"
    ),
    "runtime.testing": "InProcessRuntime",
    "host.adapters": "shared_runtime",
    "host.adapters.smolagents": "DshExecutor",
    "host.adapters.pydantic_ai": "DshCodeToolset",
    "host.adapters.langgraph": "dsh_eval_fn",
    "host.mcp": (
        "DshSandboxProvider McpError McpServeConfig McpServers McpServerSpec "
        "elicitation_ask_handler"
    ),
    "host.cluster": "ClusterError RayRuntime",
    "host.telemetry": "TelemetrySettings configure trace_run",
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
