"""``dsh_eval_fn``: an ``eval_fn`` for langgraph-codeact's ``create_codeact`` on dsh-code."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any

from host.adapters._steps import StepOutcome, Steps, SyncSteps, ToolSpec, function_spec, make_limits

if TYPE_CHECKING:
    from host.sandbox import SubprocessRuntime
    from runtime import Limits

__all__ = ("dsh_eval_fn",)

_NO_OUTPUT = "<code ran, no output printed to stdout>"
_VARIABLES = "_dsh_variables"


class _Evaluator:
    """The state behind one ``eval_fn``: the session, and the variables it last handed back."""

    def __init__(self, steps: Steps) -> None:
        self.steps = steps
        self.returned: dict[str, Any] = {}

    def prepare(self, context: Mapping[str, Any]) -> tuple[dict[str, ToolSpec], dict[str, Any]]:
        """The context's tools, and the variables the session does not hold already."""
        tools = {name: function_spec(value) for name, value in context.items() if callable(value)}
        variables = {
            name: value
            for name, value in context.items()
            if not callable(value)
            and not (name in self.returned and _same(self.returned[name], value))
        }
        return tools, variables

    def finish(self, outcome: StepOutcome) -> tuple[str, dict[str, Any]]:
        text = outcome.logs
        if outcome.error is not None:
            text += f"Error during execution: {outcome.error}"
        new_vars: dict[str, Any] = {}
        if isinstance(outcome.output, dict) and isinstance(outcome.output.get(_VARIABLES), dict):
            new_vars = outcome.output[_VARIABLES]
        self.returned.update(new_vars)
        return (text or _NO_OUTPUT), new_vars


def _same(a: Any, b: Any) -> bool:
    try:
        return bool(a == b)
    except Exception:
        return False


_EPILOGUE = f"{{{_VARIABLES!r}: _dsh_variables_out()}}"


def dsh_eval_fn(
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
    blocking: bool = False,
) -> Callable[[str, dict[str, Any]], Any]:
    """An ``eval_fn`` for ``create_codeact(model, tools, eval_fn)``: each script a run in a
    fresh child, within one session (any variable survives); the context's functions are
    the tools, run on the host; the returned locals are the script's JSON variables.

    Async by default (for ``ainvoke``); ``blocking=True`` gives a plain function (for
    ``invoke``) whose event loop runs on a thread of its own. Without a ``runtime`` the
    processes end with the event loop (async: ``host.adapters.shared_runtime``) or with
    ``close()`` or garbage collection (blocking); ``aclose()`` forgets the session.
    """
    steps = Steps(
        make_limits(
            limits,
            compute_ms=compute_ms,
            max_wall_ms=max_wall_ms,
            max_heap_mb=max_heap_mb,
            max_output_bytes=max_output_bytes,
            max_parallel_sub_calls=max_parallel_sub_calls,
        ),
        runtime=runtime,
        max_state_bytes=max_state_bytes,
        runtime_options=runtime_options,
    )
    evaluator = _Evaluator(steps)
    if blocking:
        sync = SyncSteps(steps)

        def eval_fn(code: str, context: dict[str, Any]) -> tuple[str, dict[str, Any]]:
            tools, variables = evaluator.prepare(context)
            outcome = sync.run(code, tools, variables=variables, epilogue=_EPILOGUE)
            return evaluator.finish(outcome)

        eval_fn.close = sync.close  # type: ignore[attr-defined]
        return eval_fn

    async def async_eval_fn(code: str, context: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        tools, variables = evaluator.prepare(context)
        outcome = await steps.run(code, tools, variables=variables, epilogue=_EPILOGUE)
        return evaluator.finish(outcome)

    close: Callable[[], Awaitable[None]] = steps.aclose
    async_eval_fn.aclose = close  # type: ignore[attr-defined]
    return async_eval_fn
