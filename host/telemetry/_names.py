"""The names of dsh-code's spans, attributes, events and metrics, each defined once.

GenAI semantic-convention names where one applies (``gen_ai.*``, ``error.type``); the
``dsh_code.*`` namespace for the rest. The README's tracing section documents each one.
"""

from __future__ import annotations

from typing import Final

__all__ = (
    "ATTR_BINDING",
    "ATTR_CALL_STYLE",
    "ATTR_CHILD_SPARE",
    "ATTR_DECISION",
    "ATTR_ERROR_MESSAGE",
    "ATTR_ERROR_TYPE",
    "ATTR_ISOLATION",
    "ATTR_KILL_REASON",
    "ATTR_LANGUAGE",
    "ATTR_LIMITS_COMPUTE_MS",
    "ATTR_LIMITS_MAX_HEAP_MB",
    "ATTR_LIMITS_MAX_OUTPUT_BYTES",
    "ATTR_LIMITS_MAX_PARALLEL_SUB_CALLS",
    "ATTR_LIMITS_MAX_WALL_MS",
    "ATTR_LIMIT_NAME",
    "ATTR_LIMIT_VALUE",
    "ATTR_LOGS",
    "ATTR_OPERATION_NAME",
    "ATTR_POLICY",
    "ATTR_PROGRAM",
    "ATTR_RESULT",
    "ATTR_RUN_BUDGET",
    "ATTR_RUN_CALLS",
    "ATTR_RUN_COMPUTE_MS",
    "ATTR_RUN_DROPPED_FRAMES",
    "ATTR_RUN_EXCEPTION_TYPE",
    "ATTR_RUN_EXIT_STATUS",
    "ATTR_RUN_ID",
    "ATTR_RUN_LINENO",
    "ATTR_RUN_NODE",
    "ATTR_RUN_OUTCOME",
    "ATTR_RUN_OUTPUT_BYTES",
    "ATTR_RUN_STATE_BYTES",
    "ATTR_RUN_WALL_MS",
    "ATTR_SESSION",
    "ATTR_TOOL_CALL_ARGUMENTS",
    "ATTR_TOOL_CALL_ID",
    "ATTR_TOOL_CALL_RESULT",
    "ATTR_TOOL_NAME",
    "EVENT_KILL",
    "EVENT_LIMIT",
    "METRIC_CHILD_WAIT",
    "METRIC_RUNS",
    "METRIC_RUN_COMPUTE",
    "METRIC_RUN_DURATION",
    "METRIC_TOOL_CALL_DURATION",
    "OPERATION_EXECUTE_TOOL",
    "RUN_SPAN",
    "TOOL_SPAN",
)

#: The span of one run; its children are the run's ``execute_tool`` spans.
RUN_SPAN: Final = "dsh_code.run"
#: The span of one binding call: ``execute_tool {gen_ai.tool.name}``.
TOOL_SPAN: Final = "execute_tool {}"
OPERATION_EXECUTE_TOOL: Final = "execute_tool"

# -- GenAI semantic conventions ------------------------------------------------------------
ATTR_OPERATION_NAME: Final = "gen_ai.operation.name"
ATTR_TOOL_NAME: Final = "gen_ai.tool.name"
ATTR_TOOL_CALL_ID: Final = "gen_ai.tool.call.id"
#: Opt-in (``tool_arguments``): the call's arguments as JSON, bounded.
ATTR_TOOL_CALL_ARGUMENTS: Final = "gen_ai.tool.call.arguments"
#: Opt-in (``tool_results``): the call's value as JSON, or its failure's message, bounded.
ATTR_TOOL_CALL_RESULT: Final = "gen_ai.tool.call.result"
#: A failed run's kind, or a failed call's error code.
ATTR_ERROR_TYPE: Final = "error.type"

# -- a run ---------------------------------------------------------------------------------
ATTR_RUN_ID: Final = "dsh_code.run.id"
ATTR_LANGUAGE: Final = "dsh_code.language"
ATTR_ISOLATION: Final = "dsh_code.isolation"
ATTR_POLICY: Final = "dsh_code.policy"
ATTR_CALL_STYLE: Final = "dsh_code.call_style"
ATTR_SESSION: Final = "dsh_code.session"
ATTR_LIMITS_COMPUTE_MS: Final = "dsh_code.limits.compute_ms"
ATTR_LIMITS_MAX_WALL_MS: Final = "dsh_code.limits.max_wall_ms"
ATTR_LIMITS_MAX_OUTPUT_BYTES: Final = "dsh_code.limits.max_output_bytes"
ATTR_LIMITS_MAX_HEAP_MB: Final = "dsh_code.limits.max_heap_mb"
ATTR_LIMITS_MAX_PARALLEL_SUB_CALLS: Final = "dsh_code.limits.max_parallel_sub_calls"
#: ``ok``, or the failure kind.
ATTR_RUN_OUTCOME: Final = "dsh_code.run.outcome"
ATTR_RUN_COMPUTE_MS: Final = "dsh_code.run.compute_ms"
ATTR_RUN_WALL_MS: Final = "dsh_code.run.wall_ms"
ATTR_RUN_OUTPUT_BYTES: Final = "dsh_code.run.output_bytes"
ATTR_RUN_CALLS: Final = "dsh_code.run.calls"
ATTR_RUN_STATE_BYTES: Final = "dsh_code.run.state_bytes"
ATTR_RUN_DROPPED_FRAMES: Final = "dsh_code.run.dropped_frames"
ATTR_RUN_NODE: Final = "dsh_code.run.node"
ATTR_RUN_BUDGET: Final = "dsh_code.run.budget"
ATTR_RUN_EXIT_STATUS: Final = "dsh_code.run.exit_status"
ATTR_RUN_EXCEPTION_TYPE: Final = "dsh_code.run.exception_type"
ATTR_RUN_LINENO: Final = "dsh_code.run.lineno"
#: Opt-in (``program``): the program text, bounded.
ATTR_PROGRAM: Final = "dsh_code.program"
#: Opt-in (``logs``): the log lines joined by newlines, bounded.
ATTR_LOGS: Final = "dsh_code.logs"
#: Opt-in (``result``): the result as JSON, bounded.
ATTR_RESULT: Final = "dsh_code.result"
#: Opt-in (``result``): a failed run's message (it may quote the program's data), bounded.
ATTR_ERROR_MESSAGE: Final = "dsh_code.error.message"
#: A run's event: it passed a limit (``dsh_code.limit.name``, ``dsh_code.limit.value``).
EVENT_LIMIT: Final = "dsh_code.limit_exceeded"
ATTR_LIMIT_NAME: Final = "dsh_code.limit.name"
ATTR_LIMIT_VALUE: Final = "dsh_code.limit.value"
#: A run's event: the host killed its processes before the program ended.
EVENT_KILL: Final = "dsh_code.kill"
ATTR_KILL_REASON: Final = "dsh_code.kill.reason"

# -- a binding call ------------------------------------------------------------------------
#: The binding's name in the program (``tools.read_file``).
ATTR_BINDING: Final = "dsh_code.binding"
#: ``allowed``, ``asked`` (allowed once asked), ``denied`` or ``timed_out``.
ATTR_DECISION: Final = "dsh_code.tool.decision"

# -- metrics -------------------------------------------------------------------------------
#: Histogram, seconds: a run's wall time, by language, isolation and outcome.
METRIC_RUN_DURATION: Final = "dsh_code.run.duration"
#: Histogram, seconds: a run's busy CPU time (its compute budget's measure).
METRIC_RUN_COMPUTE: Final = "dsh_code.run.compute_time"
#: Counter: runs, by language, isolation and outcome (``ok`` or the failure kind).
METRIC_RUNS: Final = "dsh_code.runs"
#: Histogram, seconds: a binding call's latency, by tool, decision and error code.
METRIC_TOOL_CALL_DURATION: Final = "dsh_code.tool_call.duration"
#: Histogram, seconds: how long a run waited for its child to be ready (a spare's wait).
METRIC_CHILD_WAIT: Final = "dsh_code.child.wait"
#: Whether the run's child was a spare forked ahead of time (else forked for the run).
ATTR_CHILD_SPARE: Final = "dsh_code.child.spare"
