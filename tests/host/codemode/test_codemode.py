"""Code mode over the in-process fake runtime: run_code, the pipeline per call, scheduling,
events, the SDK section (the sandbox itself: test_codemode_sandbox.py)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any, TypedDict

import anyio
import pydantic
import pytest

from host.codemode import DISPATCH_EVENT, DISPATCH_START_EVENT, CodeMode, CodeModeConfig
from host.tools import Deny, ToolCall, ToolRegistry, ToolRunContext, ToolsConfig, tool
from runtime import Limits
from runtime.testing import InProcessRuntime
from tests.conftest import ALL_BACKENDS

pytestmark = pytest.mark.anyio

#: Programs that use asyncio themselves: the in-process fake runs them on the host's own
#: loop, so they need an asyncio host (the sandbox runs them under any host loop).
ASYNCIO_HOSTS = pytest.mark.parametrize(
    "anyio_backend", [p for p in ALL_BACKENDS if "asyncio" in str(p.id)]
)


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


ACTIVE = {"now": 0, "peak": 0}


async def _nap(ms: int) -> int:
    ACTIVE["now"] += 1
    ACTIVE["peak"] = max(ACTIVE["peak"], ACTIVE["now"])
    try:
        await anyio.sleep(ms / 1000)
    finally:
        ACTIVE["now"] -= 1
    return ms


@tool(concurrency_safe=True)
async def nap(ms: int) -> int:
    """Sleep, then return the milliseconds slept (safe to run in parallel)."""
    return await _nap(ms)


@tool
async def nap_exclusive(ms: int) -> int:
    """Sleep, then return the milliseconds slept (exclusive)."""
    return await _nap(ms)


@tool
def boom() -> str:
    """Always fails."""
    raise RuntimeError("boom went the tool")


PIXEL = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR4nGNgYGD4DwABBAEAwS2OUAAAAABJRU5ErkJggg=="


@tool(
    render=lambda args, value: [
        {"type": "text", "text": "a picture"},
        {"type": "image", "data": PIXEL, "mime_type": "image/png"},
    ]
)
def picture() -> dict[str, str]:
    """Returns a value; its content carries an image."""
    return {"kind": "png"}


TOOLS = [add, nap, nap_exclusive, boom, picture]


@pytest.fixture
async def setup() -> AsyncIterator[tuple[ToolRegistry, CodeMode]]:
    registry = ToolRegistry(ToolsConfig(mode="code"))
    for definition in TOOLS:
        registry.register(definition)
    async with InProcessRuntime() as runtime:
        config = CodeModeConfig(limits=Limits(compute_ms=5_000, max_wall_ms=20_000))
        yield registry, CodeMode(registry, runtime, config)


async def test_run_code_returns_logs_and_result(setup: tuple[ToolRegistry, CodeMode]) -> None:
    _, codemode = setup
    result = await codemode.run("print('hi')\nreturn await tools.add(a=2, b=3)")
    shape = result.to_dict()
    assert shape["is_error"] is False
    assert shape["value"] == {"logs": ["hi"], "result": 5}
    assert "hi" in shape["content"][0]["text"] and "5" in shape["content"][0]["text"]


async def test_a_program_without_a_result_has_no_result_key(
    setup: tuple[ToolRegistry, CodeMode],
) -> None:
    _, codemode = setup
    result = await codemode.run("x = 1")
    assert result.to_dict()["value"] == {"logs": []}


async def test_a_failed_run_is_a_structured_code_run_failed(
    setup: tuple[ToolRegistry, CodeMode],
) -> None:
    _, codemode = setup
    result = await codemode.run("print('before')\nx = 1\n1 / 0")
    shape = result.to_dict()
    assert shape["is_error"] is True
    assert shape["error"]["info"]["code"] == "CODE_RUN_FAILED"
    facts = shape["meta"]["code_run"]
    assert facts["kind"] == "exception"
    assert facts["logs"] == ["before"]
    assert facts["lineno"] == 3
    assert 'File "<program>", line 3' in facts["traceback"]
    assert "before" in shape["content"][0]["text"]


async def test_a_failed_tool_call_raises_tool_call_error(
    setup: tuple[ToolRegistry, CodeMode],
) -> None:
    _, codemode = setup
    program = (
        "try:\n"
        "    await tools.boom()\n"
        "except ToolCallError as e:\n"
        "    return [e.tool, e.code, e.message]\n"
    )
    result = await codemode.run(program)
    assert result.to_dict()["value"]["result"] == [
        "boom",
        "TOOL_ERROR",
        "RuntimeError: boom went the tool",
    ]


async def test_a_builtin_exception_of_a_tool_is_raised_as_that_type(
    setup: tuple[ToolRegistry, CodeMode],
) -> None:
    _, codemode = setup
    program = (
        "try:\n"
        "    await tools.boom()\n"
        "except RuntimeError as e:\n"
        "    return [isinstance(e, ToolCallError), e.code, e.message]\n"
    )
    result = await codemode.run(program)
    assert result.to_dict()["value"]["result"] == [
        True,
        "TOOL_ERROR",
        "RuntimeError: boom went the tool",
    ]


async def test_every_call_goes_through_the_pipeline(setup: tuple[ToolRegistry, CodeMode]) -> None:
    registry, codemode = setup
    registry.pre_execute(
        lambda call, decision: Deny("no adding today") if call.name == "add" else None
    )
    program = "try:\n    await tools.add(a=1, b=2)\nexcept ToolCallError as e:\n    return e.code"
    result = await codemode.run(program)
    assert result.to_dict()["value"]["result"] == "DENIED"
    invalid = await codemode.run(
        "try:\n    await tools.add(a='x', b=2)\nexcept ToolCallError as e:\n    return e.code"
    )
    assert invalid.to_dict()["value"]["result"] == "INVALID_ARGS"


async def test_dispatch_events_bracket_each_call(setup: tuple[ToolRegistry, CodeMode]) -> None:
    registry, codemode = setup
    seen: list[tuple[str, Any]] = []
    registry.on(DISPATCH_START_EVENT, lambda p: seen.append(("start", p["name"])))
    registry.on(
        DISPATCH_EVENT, lambda p: seen.append(("done", (p["name"], p["is_error"], p["content"])))
    )
    await codemode.run(
        "await tools.add(a=1, b=1)\ntry:\n    await tools.boom()\nexcept ToolCallError:\n    pass"
    )
    assert [s[0] for s in seen] == ["start", "done", "start", "done"]
    assert seen[1][1][:2] == ("add", False)
    assert seen[3][1][:2] == ("boom", True)
    assert seen[3][1][2][0]["text"].startswith("Error:")


@ASYNCIO_HOSTS
async def test_safe_calls_overlap_and_exclusive_calls_are_serial(
    setup: tuple[ToolRegistry, CodeMode],
) -> None:
    _, codemode = setup
    gather = (
        "import asyncio\nreturn await asyncio.gather(*(tools.{name}(ms=100) for _ in range(5)))"
    )
    ACTIVE["peak"] = 0
    result = await codemode.run_program(gather.format(name="nap"))
    assert result.value == [100] * 5
    assert ACTIVE["peak"] == 5  # all five at once
    ACTIVE["peak"] = 0
    result = await codemode.run_program(gather.format(name="nap_exclusive"))
    assert result.value == [100] * 5
    assert ACTIVE["peak"] == 1  # one after another


@ASYNCIO_HOSTS
async def test_max_parallel_sub_calls_bounds_safe_calls(
    setup: tuple[ToolRegistry, CodeMode],
) -> None:
    _ = setup
    async with InProcessRuntime() as runtime:
        config = CodeModeConfig(limits=Limits(max_parallel_sub_calls=2))
        codemode = CodeMode(ToolRegistry(), runtime, config)
        codemode.registry.register(nap)
        ACTIVE["peak"] = 0
        program = "import asyncio\nawait asyncio.gather(*(tools.nap(ms=50) for _ in range(6)))"
        result = await codemode.run_program(program)
    assert result.ok
    assert ACTIVE["peak"] == 2


async def test_the_number_of_calls_per_run_is_capped(setup: tuple[ToolRegistry, CodeMode]) -> None:
    _ = setup
    async with InProcessRuntime() as runtime:
        codemode = CodeMode(ToolRegistry(), runtime, CodeModeConfig(max_tool_calls=3))
        codemode.registry.register(add)
        program = (
            "n = 0\n"
            "try:\n"
            "    for _ in range(10):\n"
            "        await tools.add(a=1, b=1)\n"
            "        n += 1\n"
            "except ToolCallError as e:\n"
            "    return [n, e.code, e.message]\n"
        )
        result = await codemode.run_program(program)
    n, code, message = result.value
    assert (n, code) == (3, "DENIED")
    assert "max_tool_calls" in message


async def test_gathered_calls_count_against_the_cap_when_they_start(
    setup: tuple[ToolRegistry, CodeMode],
) -> None:
    _ = setup
    async with InProcessRuntime() as runtime:
        codemode = CodeMode(ToolRegistry(), runtime, CodeModeConfig(max_tool_calls=3))
        codemode.registry.register(nap)
        program = (
            "import asyncio\n"
            "got = await asyncio.gather(*(tools.nap(ms=50) for _ in range(10)), "
            "return_exceptions=True)\n"
            "return [type(g).__name__ for g in got]\n"
        )
        result = await codemode.run_program(program)
    names = result.value
    assert names.count("ToolCallError") == 7, names
    assert len(names) == 10


async def test_the_sdk_section_is_deterministic_and_scoped(
    setup: tuple[ToolRegistry, CodeMode],
) -> None:
    registry, codemode = setup
    first = codemode.sdk()
    other = ToolRegistry()
    for definition in reversed(TOOLS):
        other.register(definition)
    async with InProcessRuntime() as runtime:
        second = CodeMode(other, runtime).sdk()
    assert first.text == second.text and first.sha256 == second.sha256
    assert "async def add(*, a: int, b: int) -> int" in first.text
    assert "top-level `await`" in first.text
    agent = registry.agent_scope()
    agent.restrict(allow=["add"])
    scoped = codemode.sdk(agent)
    assert "def add(" in scoped.text and "def boom(" not in scoped.text
    assert scoped.names == {"add": "add"}


async def test_presentation_modes(setup: tuple[ToolRegistry, CodeMode]) -> None:
    registry, codemode = setup
    assert [t["name"] for t in codemode.model_tools()] == ["run_code"]
    agent = registry.agent_scope()
    agent.present_as("native")
    assert sorted(t["name"] for t in codemode.model_tools(agent)) == [
        "add",
        "boom",
        "nap",
        "nap_exclusive",
        "picture",
    ]
    agent.present_as("both")
    assert "run_code" in [t["name"] for t in codemode.model_tools(agent)]
    openai = codemode.model_tools(format="openai")
    assert openai[0]["function"]["name"] == "run_code"
    assert "async def add" in openai[0]["function"]["description"]


async def test_an_agent_scope_runs_its_own_tools(setup: tuple[ToolRegistry, CodeMode]) -> None:
    registry, codemode = setup
    agent = registry.agent_scope()

    @tool(name="secret")
    def secret() -> str:
        """Only this agent has it."""
        return "s3cret"

    registry.register(secret, scope=agent)
    assert (await codemode.run("return await tools.secret()", scope=agent)).to_dict()["value"][
        "result"
    ] == "s3cret"
    outside = await codemode.run("return await tools.secret()")
    assert outside.to_dict()["meta"]["code_run"]["kind"] == "exception"


async def test_a_preflight_type_check_stops_a_bad_program_before_it_runs(
    setup: tuple[ToolRegistry, CodeMode],
) -> None:
    _ = setup
    calls: list[ToolCall] = []
    async with InProcessRuntime() as runtime:
        codemode = CodeMode(ToolRegistry(), runtime, CodeModeConfig(preflight_check=True))
        codemode.registry.register(add)
        codemode.registry.pre_execute(lambda call, decision: calls.append(call))
        result = await codemode.run_program("x = await tools.add(a=1, b='two')\nreturn x")
    assert result.error is not None and result.error.kind == "parse"
    assert "1:" in result.error.message and "type check" in result.error.message
    assert calls == []


async def test_none_for_an_optional_parameter_means_not_given(
    setup: tuple[ToolRegistry, CodeMode],
) -> None:
    registry, codemode = setup

    @tool(name="greet")
    def greet(name: str = "world") -> str:
        """Greet someone."""
        return f"hello {name}"

    registry.register(greet)
    assert (
        await codemode.run_program("return await tools.greet(name=None)")
    ).value == "hello world"


async def test_images_from_calls_are_attached_after_the_run(
    setup: tuple[ToolRegistry, CodeMode],
) -> None:
    _, codemode = setup
    program = "a = await tools.picture()\nb = await tools.picture()\nreturn [a, b]"
    result = (await codemode.run(program)).to_dict()
    content = result["content"]
    assert content[0]["type"] == "text" and '{"kind":"png"}' in content[0]["text"]
    assert content[1:] == [{"type": "image", "data": PIXEL, "mime_type": "image/png"}] * 2
    assert result["value"]["result"] == [{"kind": "png"}] * 2


async def test_tools_registered_disposed_or_masked_between_runs_are_seen(
    setup: tuple[ToolRegistry, CodeMode],
) -> None:
    registry, codemode = setup
    program = "return sorted(n for n in dir(tools) if not n.startswith('_'))"
    before = (await codemode.run(program)).to_dict()["value"]["result"]
    assert "add" in before and "shout" not in before

    @tool
    def shout(text: str) -> str:
        """Upper-case a text."""
        return text.upper()

    dispose = registry.register(shout)
    added = await codemode.run("return await tools.shout(text='hi')")
    assert added.to_dict()["value"]["result"] == "HI"
    assert "shout" in codemode.sdk().names.values()
    dispose()
    assert (await codemode.run(program)).to_dict()["value"]["result"] == before
    agent = registry.agent_scope()
    agent.restrict(deny=["add"])
    masked = (await codemode.run(program, scope=agent)).to_dict()["value"]["result"]
    assert masked == [n for n in before if n != "add"]
    assert (await codemode.run(program)).to_dict()["value"]["result"] == before


async def test_a_tool_sees_the_runs_stable_call_id(setup: tuple[ToolRegistry, CodeMode]) -> None:
    registry, codemode = setup
    ids: list[str | None] = []

    @tool
    def which(*, ctx: ToolRunContext) -> int:
        """Record the call id the tool's context carries."""
        ids.append(ctx.call_id)
        return len(ids)

    registry.register(which)
    result = await codemode.run("await tools.which()\nreturn await tools.which()")
    assert result.to_dict()["value"]["result"] == 2
    run_id = ids[0].rsplit(":", 1)[0] if ids[0] else ""
    assert run_id and ids == [f"{run_id}:1", f"{run_id}:2"]


async def test_a_dsl_tool_is_rendered_as_validation_takes_it() -> None:
    from host.tools import define_tool, schema

    def read(args: Any, _ctx: ToolRunContext) -> str:
        return str(args["path"])

    registry = ToolRegistry(ToolsConfig(mode="code"))
    registry.register(
        define_tool(
            name="read",
            description="Read a file.",
            execute=read,
            parameters={"path": schema.string(required=True), "n": schema.integer()},
        )
    )
    codemode = CodeMode(registry, InProcessRuntime())
    assert 'async def read(*, path: str, n: int = ...) -> JsonValue:\n """Read a file."""' in (
        codemode.sdk().text
    )
    # What the SDK does not offer, validation does not take: the model hears which keyword.
    failed = await codemode.run("return await tools.read(path='a', mode='r')")
    assert (
        "$.mode: unexpected property (not allowed here)" in failed.to_dict()["content"][0]["text"]
    )


class Order(TypedDict):
    quantity: int
    item: str


class Address(pydantic.BaseModel):
    street: str
    city: str
    zip_code: str | None = None


@tool
def ship(order: Order, to: Address) -> str:
    """Ship an order."""
    return "ok"


async def test_typeddict_and_model_fields_keep_their_declared_order() -> None:
    registry = ToolRegistry(ToolsConfig(mode="code"))
    registry.register(ship)
    text = CodeMode(registry, InProcessRuntime()).sdk().text
    assert "class Order(TypedDict):\n quantity: int\n item: str\n" in text
    assert "(TypedDict):\n street: str\n city: str\n zip_code: NotRequired[str | None]" in text
    assert "async def ship(*, order: Order, to: To) -> str:" in text
