"""DshExecutor under smolagents' real CodeAgent, driven by a scripted model."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
from smolagents import CodeAgent, tool
from smolagents.local_python_executor import InterpreterError, PythonExecutor
from smolagents.models import ChatMessage, MessageRole, Model

from host.adapters.smolagents import DshExecutor
from tests.host.adapters.support import children, left_behind

pytestmark = pytest.mark.timeout(120)

CALLS: list[str] = []


@tool  # type: ignore[untyped-decorator]
def add(a: int, b: int) -> int:
    """Add two integers.

    Args:
        a: the first
        b: the second
    """
    CALLS.append(f"add({a}, {b})")
    return a + b


@tool  # type: ignore[untyped-decorator]
def lookup(key: str) -> str:
    """Look a key up; fails for unknown keys.

    Args:
        key: the key
    """
    CALLS.append(f"lookup({key})")
    if key != "pi":
        raise KeyError(f"no such key: {key}")
    return "3.14159"


class Scripted(Model):  # type: ignore[misc]
    """A model that answers each step with the next scripted program."""

    def __init__(self, programs: list[str]) -> None:
        super().__init__(model_id="scripted")
        self.programs = list(programs)
        self.seen: list[str] = []

    def generate(self, messages: list[Any], **kwargs: Any) -> ChatMessage:
        self.seen.append(str(messages[-1].content if messages else ""))
        code = self.programs.pop(0)
        return ChatMessage(
            role=MessageRole.ASSISTANT, content=f"Thought: on.\n<code>\n{code}\n</code>"
        )


@pytest.fixture
def before() -> Iterator[set[int]]:
    CALLS.clear()
    pids = children()
    yield pids
    assert not left_behind(pids), "a process of the executor outlived the agent"


def _agent(model: Model, executor: DshExecutor, **kwargs: Any) -> CodeAgent:
    return CodeAgent(
        tools=[add, lookup], model=model, executor=executor, verbosity_level=0, **kwargs
    )


def test_two_steps_share_variables_and_call_tools_on_the_host(before: set[int]) -> None:
    model = Scripted(
        [
            "import math\nx = add(2, 3)\nprint('x is', x)\nx * 2",
            "y = add(x, b=10)\nfinal_answer([y, float(lookup('pi')), math.floor(2.5)])",
        ]
    )
    executor = DshExecutor()
    assert isinstance(executor, PythonExecutor)
    with _agent(model, executor) as agent:
        answer = agent.run("compute")
        steps = agent.memory.steps[1:]
        assert answer == [15, 3.14159, 2]
        assert CALLS == ["add(2, 3)", "add(5, 10)", "lookup(pi)"]  # run here, in the host
        assert "x is 5" in steps[0].observations and "10" in steps[0].observations
        assert steps[0].action_output == 10  # the last expression
    # CodeAgent's `with` called cleanup(): no process left (the fixture checks)


def test_a_tool_failure_reaches_the_model_with_the_traceback_and_it_recovers(
    before: set[int],
) -> None:
    model = Scripted(
        [
            "print('before')\nvalue = lookup('tau')",
            "try:\n    lookup('tau')\nexcept ToolCallError as exc:\n    print('caught', exc.code)\n"
            "final_answer(lookup('pi'))",
        ]
    )
    with _agent(model, DshExecutor()) as agent:
        assert agent.run("find pi") == "3.14159"
        failed = agent.memory.steps[1]
        assert failed.error is not None
        text = str(failed.error)
        assert 'File "<program>", line 2' in text  # the model's own line numbers
        assert "KeyError: lookup: 'no such key: tau'" in text  # the tool's own type
        assert "before" in (failed.observations or "")  # the logs so far
        assert "no such key: tau" in model.seen[1]  # what the model read next
        assert "caught TOOL_ERROR" in agent.memory.steps[2].observations


def test_the_model_reads_its_failure_without_names_of_ours(before: set[int]) -> None:
    model = Scripted(["print('before')\nlookup('tau')", "final_answer('done')"])
    with _agent(model, DshExecutor()) as agent:
        assert agent.run("find tau") == "done"
        # smolagents' own executor's first line, then the program's traceback: the tool's own
        # exception type, the model's line, nothing of dsh-code's
        assert str(agent.memory.steps[1].error) == (
            "Code execution failed at line 'lookup('tau')' due to: "
            "KeyError: lookup: 'no such key: tau' (TOOL_ERROR)\n"
            "Traceback (most recent call last):\n"
            '  File "<program>", line 2, in <module>\n'
            "    lookup('tau')\n"
            "    ^^^^^^^^^^^^^\n"
            "KeyError: lookup: 'no such key: tau' (TOOL_ERROR)"
        )


def test_a_budget_overrun_is_reported_to_the_model(before: set[int]) -> None:
    model = Scripted(["while True:\n    pass", "final_answer('gave up')"])
    with _agent(model, DshExecutor(compute_ms=300)) as agent:
        assert agent.run("spin") == "gave up"
        error = str(agent.memory.steps[1].error)
        assert "budget" in error and "compute" in error
        assert "budget" in model.seen[1]


def test_variables_sent_seed_the_session_and_unkept_ones_are_named(before: set[int]) -> None:
    model = Scripted(
        ["f = open('/dev/null')\nn = limit + 1", "final_answer([n, limit, 'f' in globals()])"]
    )
    with _agent(model, DshExecutor()) as agent:
        assert agent.run("go", additional_args={"limit": 41}) == [42, 41, False]
        assert "variable 'f' is not kept" in agent.memory.steps[1].observations


def test_it_runs_inside_a_running_event_loop_and_is_collected_without_cleanup(
    before: set[int],
) -> None:
    async def main() -> Any:
        model = Scripted(["final_answer(add(1, 2))"])
        agent = _agent(model, DshExecutor())
        return agent.run("go")  # smolagents blocks: our loop is on a thread of its own

    assert asyncio.run(main()) == 3
    # no cleanup(): the executor was collected with the agent (the fixture checks)


def test_limits_are_arguments() -> None:
    executor = DshExecutor(compute_ms=1000, max_wall_ms=2000, max_heap_mb=64)
    try:
        assert (executor.limits.compute_ms, executor.limits.max_wall_ms) == (1000, 2000)
        assert executor.limits.max_heap_mb == 64
        with pytest.raises(ValueError, match="compute_ms"):
            DshExecutor(compute_ms=0)
    finally:
        executor.cleanup()


def _executor(**tools: Any) -> DshExecutor:
    executor = DshExecutor()
    executor.send_tools(tools)
    return executor


def test_an_executor_without_tools_runs_its_steps(before: set[int]) -> None:
    executor = DshExecutor()
    try:
        assert executor("x = 2\nx * 3").output == 6  # send_tools never called
        executor.send_tools({})
        assert executor("x + 1").output == 3
    finally:
        executor.cleanup()


@pytest.mark.parametrize(
    ("code", "output"),
    [
        ("a = b = 1", 1),
        ("x = [1]\nx += [2]", [1, 2]),
        ("n: int = 4", 4),
        ("a, b = 1, 2", "(1, 2)"),  # not JSON: as its str(), what CodeAgent shows the model
        ("d = {}\nd['k'] = add(1, 2)", 3),
        ("x = 1\nif x:\n    y = 2", None),
    ],
)
def test_a_step_ending_in_an_assignment_shows_the_assigned_value(
    before: set[int], code: str, output: Any
) -> None:
    executor = _executor(add=add)
    try:
        assert executor(code).output == output
    finally:
        executor.cleanup()


def test_a_manager_sees_what_its_last_line_assigned(before: set[int]) -> None:
    model = Scripted(["report = add(20, 22)", "final_answer(report)"])
    with _agent(model, DshExecutor()) as agent:
        assert agent.run("go") == 42
        step = agent.memory.steps[1]
        assert step.action_output == 42
        assert "Last output from code snippet:\n42" in step.observations


def test_a_final_answer_that_is_not_json_crosses_through_the_safe_serializer(
    before: set[int],
) -> None:
    import numpy as np
    import PIL.Image
    from smolagents.default_tools import FinalAnswerTool

    executor = _executor(final_answer=FinalAnswerTool())
    try:
        array = executor("import numpy as np\nfinal_answer(np.arange(6).reshape(2, 3))")
        assert array.is_final_answer
        assert isinstance(array.output, np.ndarray)
        assert array.output.tolist() == [[0, 1, 2], [3, 4, 5]]
        image = executor(
            "from PIL import Image\nfinal_answer(Image.new('RGB', (3, 2), (255, 0, 0)))"
        )
        assert isinstance(image.output, PIL.Image.Image)
        assert (image.output.size, image.output.getpixel((0, 0))) == ((3, 2), (255, 0, 0))
        mixed = executor("final_answer(answer={'pair': (1, 2), 'set': {3}})").output
        assert mixed == {"pair": (1, 2), "set": {3}}
        with pytest.raises(InterpreterError, match="Cannot safely serialize object of type"):
            executor("def f():\n    return 1\nfinal_answer(f)")  # functions cannot cross
    finally:
        executor.cleanup()


def test_a_traceback_shows_the_codes_own_line(before: set[int]) -> None:
    executor = _executor(add=add, lookup=lookup)
    try:
        with pytest.raises(InterpreterError) as failed:
            executor("x = add(1, 2)\nlookup('tau')")
        text = str(failed.value)
        assert "_dsh" not in text and "<prelude>" not in text
        assert "File \"<program>\", line 2, in <module>\n    lookup('tau')\n    ^^^^" in text
        with pytest.raises(InterpreterError) as failed:
            executor("y = 1\ny + 1/0")
        assert "    y + 1/0\n        ~^~\n" in str(failed.value)  # the carets under 1/0
    finally:
        executor.cleanup()


def test_a_syntax_error_is_reported_at_the_codes_own_lines(before: set[int]) -> None:
    executor = _executor()
    try:
        with pytest.raises(InterpreterError) as failed:
            executor("x = 1\ns = '''abc\n\n")
        assert "(detected at line 3) (line 2, column 5)" in str(failed.value)
    finally:
        executor.cleanup()


def test_a_builtin_exception_of_a_tool_is_caught_by_its_type(before: set[int]) -> None:
    model = Scripted(
        [
            "try:\n    lookup('tau')\nexcept KeyError as exc:\n"
            "    print('caught', type(exc).__name__, isinstance(exc, ToolCallError), exc.tool)\n"
            "final_answer('done')"
        ]
    )
    with _agent(model, DshExecutor()) as agent:
        assert agent.run("go") == "done"
        assert "caught KeyError True lookup" in agent.memory.steps[1].observations


@tool  # type: ignore[untyped-decorator]
def red_square(side: int) -> Any:
    """A red square image.

    Args:
        side: its side in pixels
    """
    import PIL.Image

    return PIL.Image.new("RGB", (side, side), (255, 0, 0))


def test_a_tool_value_that_is_not_json_reaches_the_program_as_itself(before: set[int]) -> None:
    from smolagents.default_tools import FinalAnswerTool

    executor = _executor(red_square=red_square, final_answer=FinalAnswerTool())
    try:
        seen = executor(
            "from PIL import Image\nimg = red_square(4)\n"
            "[isinstance(img, Image.Image), img.size, img.getpixel((1, 1))]"
        )
        assert seen.output == "[True, (4, 4), (255, 0, 0)]"  # not JSON: shown as its str()
        answer = executor("final_answer(img)").output  # and back, the session kept it
        assert answer.size == (4, 4)
    finally:
        executor.cleanup()


def test_a_failure_reads_as_local_python_executor_says_it(before: set[int]) -> None:
    executor = _executor()
    try:
        assert executor.state["__name__"] == "__main__"
        with pytest.raises(InterpreterError) as failed:
            executor("def f():\n    raise ValueError('no')\n\nx = 1\nf()")
        text = str(failed.value)
        assert text.startswith("Code execution failed at line 'f()' due to: ValueError: no\n")
        assert 'File "<program>", line 5, in <module>' in text  # the traceback follows
    finally:
        executor.cleanup()
