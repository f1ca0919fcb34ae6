"""``DshExecutor``: smolagents' ``PythonExecutor`` on dsh-code (each step a run in a fresh child)."""

from __future__ import annotations

import ast
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from host.adapters._program import SAFE_ARGUMENT, jsonable
from host.adapters._steps import Steps, SyncSteps, ToolSpec, make_limits

if TYPE_CHECKING:
    from host.sandbox import SubprocessRuntime
    from runtime import Limits

__all__ = ("DshExecutor",)

_registered = False
_FINAL = "final_answer"


def _register() -> None:
    """Make ``DshExecutor`` a ``smolagents.PythonExecutor`` (a virtual subclass of the ABC)."""
    global _registered
    if not _registered:
        try:
            from smolagents.local_python_executor import PythonExecutor
        except ImportError as exc:
            raise ImportError(
                "host.adapters.smolagents needs smolagents: pip install 'dsh-code[smolagents]'"
            ) from exc
        PythonExecutor.register(DshExecutor)
        _registered = True


def _tool_spec(tool: Any) -> ToolSpec:
    params = tuple(getattr(tool, "inputs", None) or ())
    return ToolSpec(tool, params, encode=_safe_value)


def _safe_value(value: Any) -> Any:
    """A tool's value for the program: JSON as it is; else as smolagents' remote executors
    send values, through its safe serializer (an image, an array arrive as themselves);
    what that cannot write, as text."""
    from smolagents.serialization import SafeSerializer, SerializationError

    from runtime.lowlevel import json_problem

    if json_problem(value) is None:
        return value
    try:
        return {SAFE_ARGUMENT: SafeSerializer.dumps(value, allow_pickle=False)}
    except SerializationError:
        return jsonable(value)


def _final_answer_spec(tool: Any) -> ToolSpec:
    """The final answer tool, taking what is not JSON as the safe serializer wrote it."""
    from smolagents.serialization import SafeSerializer

    def call(**kwargs: Any) -> Any:
        if SAFE_ARGUMENT in kwargs:  # never pickle: JSON with smolagents' type tags
            kwargs = SafeSerializer.loads(kwargs[SAFE_ARGUMENT], allow_pickle=False)
        return tool(**kwargs)

    return ToolSpec(call, _tool_spec(tool).params)


_MODULE_FRAME = re.compile(r'File "<program>", line (\d+), in <module>')


def _as_local_executor_says(code: str, error: str) -> str:
    """``error`` led by the line LocalPythonExecutor gives the model: the top-level
    statement that failed and the exception (the traceback follows)."""
    frame = _MODULE_FRAME.search(error)
    lines = error.strip().splitlines()
    if frame is None or not lines:
        return error
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return error
    lineno = int(frame.group(1))
    for node in tree.body:
        if node.lineno <= lineno <= (node.end_lineno or node.lineno):
            segment = ast.get_source_segment(code, node)
            return f"Code execution failed at line '{segment}' due to: {lines[-1]}\n{error}"
    return error


def _serializer_source() -> str:
    """smolagents' safe serializer, as its remote executors send it into their sandboxes."""
    global _serializer
    if _serializer is None:
        import inspect

        from smolagents import serialization

        _serializer = inspect.getsource(serialization)
    return _serializer


_serializer: str | None = None


class DshExecutor:
    """A smolagents executor: ``CodeAgent(tools=..., model=..., executor=DshExecutor())``.

    Each step runs in a fresh contained child within one session, so variables, functions
    and imports survive from step to step; tools stay on the host and are called from the
    program by name (positionally or by keyword); ``final_answer(...)`` ends the step as
    the answer. A failed step raises ``InterpreterError`` with the program's traceback,
    which CodeAgent shows the model. Limits: ``limits`` or each one as an argument.
    ``cleanup()`` (CodeAgent's ``with`` or ``agent.cleanup()``) ends every process; so does
    garbage collection.
    """

    def __init__(
        self,
        *,
        limits: Limits | None = None,
        compute_ms: int | None = None,
        max_wall_ms: int | None = None,
        max_heap_mb: int | None = None,
        max_output_bytes: int | None = None,
        max_parallel_sub_calls: int | None = None,
        max_state_bytes: int | None = None,
        runtime: SubprocessRuntime | None = None,
        runtime_options: Mapping[str, Any] | None = None,
    ) -> None:
        _register()
        self.limits = make_limits(
            limits,
            compute_ms=compute_ms,
            max_wall_ms=max_wall_ms,
            max_heap_mb=max_heap_mb,
            max_output_bytes=max_output_bytes,
            max_parallel_sub_calls=max_parallel_sub_calls,
        )
        self._steps = SyncSteps(
            Steps(
                self.limits,
                runtime=runtime,
                max_state_bytes=max_state_bytes,
                runtime_options=runtime_options,
            )
        )
        self._tools: dict[str, ToolSpec] = {}
        self._variables: dict[str, Any] = {}
        self.state: dict[str, Any] = {"__name__": "__main__", "_print_outputs": ""}
        """What CodeAgent reads after a failed step: ``_print_outputs``, the logs so far (the
        program's variables live in its session, not here)."""

    def send_tools(self, tools: Mapping[str, Any]) -> None:
        """The tools (and managed agents) the program may call, by name."""
        self._tools = {
            name: _final_answer_spec(tool) if name == _FINAL else _tool_spec(tool)
            for name, tool in tools.items()
        }

    def send_variables(self, variables: Mapping[str, Any]) -> None:
        """Variables the next step starts with (pickled into its child)."""
        self._variables.update(variables)

    def __call__(self, code_action: str) -> Any:
        """Run one step: ``CodeOutput(output, logs, is_final_answer)``, or ``InterpreterError``."""
        from smolagents.local_python_executor import CodeOutput, InterpreterError

        final = _FINAL if _FINAL in self._tools else None
        outcome = self._steps.run(
            code_action,
            self._tools,
            final=final,
            variables=self._variables,
            serializer=_serializer_source() if self._tools else "",
        )
        self.state["_print_outputs"] = outcome.logs
        if outcome.error is not None and not outcome.is_final_answer:
            raise InterpreterError(_as_local_executor_says(code_action, outcome.error))
        self._variables = {}  # the session carries them now
        return CodeOutput(
            output=outcome.output, logs=outcome.logs, is_final_answer=outcome.is_final_answer
        )

    def cleanup(self) -> None:
        """End every process of this executor and its thread (CodeAgent calls it)."""
        self._steps.close()
