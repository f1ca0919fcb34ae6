"""The failure texts a model reads from ``run_code``, exactly: caps named with their options,
no names of ours, the tool's name said once."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

import host.sandbox._run
from host.codemode import CodeMode, CodeModeConfig
from host.sandbox import SubprocessRuntime
from host.tools import ToolRegistry, ToolsConfig, tool
from runtime import Limits

pytestmark = pytest.mark.anyio


@tool
def fetch_price(symbol: str) -> float:
    """The price of a symbol."""
    return 1.5


@pytest.fixture
async def runtime() -> AsyncIterator[SubprocessRuntime]:
    async with SubprocessRuntime() as runtime:
        yield runtime


async def _text(runtime: SubprocessRuntime, program: str, **limits: Any) -> str:
    """The text ``run_code`` gives the model for ``program``."""
    registry = ToolRegistry(ToolsConfig(mode="code"))
    registry.register(fetch_price)
    config = CodeModeConfig(limits=Limits(**{"compute_ms": 5_000, "max_wall_ms": 20_000, **limits}))
    result = await CodeMode(registry, runtime, config).run(program)
    (part,) = result.to_dict()["content"]
    text: str = part["text"]
    return text


async def test_the_heap_cap_failure_names_the_cap_and_its_option(
    runtime: SubprocessRuntime,
) -> None:
    text = await _text(runtime, "blob = bytearray(600 * 2**20)", max_heap_mb=64)
    assert text == (
        "Error: the program failed (memory): MemoryError: the program passed the heap cap "
        "of 64 MiB (max_heap_mb)"
    )


async def test_a_result_over_the_output_cap_says_the_result_is_too_big(
    runtime: SubprocessRuntime,
) -> None:
    text = await _text(runtime, "return 'x' * 200", max_output_bytes=100)
    assert text == (
        "Error: the program failed (output_limit): the result is too big: its JSON passes "
        "max_output_bytes (100 bytes)"
    )
    # Logs before it leave less room; the message still speaks of the result, not of a report.
    text = await _text(runtime, "print('y' * 50)\nreturn 'x' * 200", max_output_bytes=100)
    assert text == (
        "Error: the program failed (output_limit): the result is too big: its JSON passes "
        "max_output_bytes (100 bytes) with the 51 bytes of logs before it\n"
        "logs so far:\n" + "y" * 50
    )


async def test_a_failed_call_reads_as_tool_call_error_naming_the_tool_once(
    runtime: SubprocessRuntime,
) -> None:
    text = await _text(runtime, "price = await tools.fetch_price(symbol=3)")
    assert text == (
        "Error: the program failed (exception): Traceback (most recent call last):\n"
        '  File "<program>", line 1, in <module>\n'
        "    price = await tools.fetch_price(symbol=3)\n"
        "            ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^\n"
        "ToolCallError: invalid arguments for fetch_price: $.symbol: expected string, got "
        "integer 3 (INVALID_ARGS)"
    )
    caught = (
        "try:\n"
        "    await tools.fetch_price(symbol=3)\n"
        "except ToolCallError as exc:\n"
        "    return [repr(type(exc)), str(exc)]"
    )
    text = await _text(runtime, caught)
    assert text == (
        'result:\n["<class \'ToolCallError\'>","invalid arguments for fetch_price: $.symbol: '
        'expected string, got integer 3 (INVALID_ARGS)"]'
    )


async def test_a_traceback_shows_the_program_line_and_its_carets_as_python_does(
    runtime: SubprocessRuntime,
) -> None:
    # The last line has no newline, and a form feed in a string is no line break to Python.
    text = await _text(runtime, "note = 'a\x0cb'\nx = int('a' + 'b')")
    assert text == (
        "Error: the program failed (exception): Traceback (most recent call last):\n"
        '  File "<program>", line 2, in <module>\n'
        "    x = int('a' + 'b')\n"
        "        ^^^^^^^^^^^^^^\n"
        "ValueError: invalid literal for int() with base 10: 'ab'"
    )


async def test_what_the_model_reads_of_a_run_is_held_to_its_budget(
    runtime: SubprocessRuntime,
) -> None:
    registry = ToolRegistry(ToolsConfig(mode="code"))
    kept: list[str] = []

    def keep(whole: str) -> str:
        kept.append(whole)
        return "/spill/run-1.txt"

    codemode = CodeMode(registry, runtime, keep_output=keep)
    program = "for i in range(20_000):\n    print('line', i)\nreturn 'done'"
    result = (await codemode.run(program)).to_dict()
    text = result["content"][0]["text"]
    assert len(text.encode()) <= 80_000 < len(kept[0].encode())
    assert text.startswith("logs:\nline 0\nline 1\n") and text.endswith(
        'line 19999\nresult:\n"done"'
    )
    marker = next(line for line in text.splitlines() if line.startswith("[..."))
    assert marker.endswith("bytes) of the logs left out here; the whole text: /spill/run-1.txt]")
    assert len(result["value"]["logs"]) == 20_000  # the host's value is whole
    # A failure is held to it too; a big result is said to be cut.
    config = CodeModeConfig(max_model_output_bytes=2_000)
    small = CodeMode(ToolRegistry(ToolsConfig(mode="code")), runtime, config)
    failed = (await small.run("print('x' * 10_000)\n1 / 0")).to_dict()
    assert failed["content"][0]["text"].startswith("Error: the program failed (exception): ")
    assert "bytes) of the logs left out here" in failed["content"][0]["text"]
    assert len(failed["meta"]["code_run"]["logs"][0]) == 10_000
    big = (await small.run("return list(range(10_000))")).to_dict()["content"][0]["text"]
    assert "the result is cut: what is shown of it is not whole JSON" in big
    assert big.startswith("result:\n[0,1,2,") and big.endswith(",9998,9999]")


async def test_a_budget_failure_says_where_the_program_was(
    runtime: SubprocessRuntime, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The kill waits 2 ms for the stacks; a loaded machine (as CI's) may need longer to run
    # the child at all: here the mechanism is tested, not the machine.
    monkeypatch.setattr(host.sandbox._run, "LOCATE_WAIT_MS", 2_000)
    # A loop in C (sum holds the interpreter throughout): the child's own CPU timer stops it.
    crunch = "def crunch():\n    return sum(range(10**13))\n\ncrunch()"
    text = await _text(runtime, crunch, compute_ms=300)
    assert text == (
        "Error: the program failed (budget): the run passed its compute budget of 300 ms; it "
        "was stopped here (most recent call last):\n"
        '  File "<program>", line 4, in <module>\n'
        "    crunch()\n"
        '  File "<program>", line 2, in crunch\n'
        "    return sum(range(10**13))"
    )
    # Waiting, not busy: the wall budget, and the host asks where before the kill.
    wait = "import time\n\ndef wait():\n    time.sleep(60)\n\nwait()"
    registry = ToolRegistry(ToolsConfig(mode="code"))
    config = CodeModeConfig(limits=Limits(compute_ms=5_000, max_wall_ms=500))
    result = (await CodeMode(registry, runtime, config).run(wait)).to_dict()
    assert result["content"][0]["text"].endswith(
        "the run passed its wall-clock budget of 500 ms; it was stopped here (most recent call "
        "last):\n"
        '  File "<program>", line 6, in <module>\n'
        "    wait()\n"
        '  File "<program>", line 4, in wait\n'
        "    time.sleep(60)"
    )
    assert result["meta"]["code_run"]["lineno"] == 4
