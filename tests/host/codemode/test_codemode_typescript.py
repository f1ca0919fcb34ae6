"""Code mode over TypeScriptRuntime: the TypeScript SDK section, tools by their own names."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from host.codemode import TYPESCRIPT_INSTRUCTIONS, CodeMode, CodeModeConfig
from host.sandbox import TypeScriptRuntime
from host.tools import ToolRegistry, ToolsConfig, define_tool, schema, tool
from runtime import Limits

pytestmark = pytest.mark.anyio


@tool(concurrency_safe=True)
async def weather(city: str) -> dict[str, float]:
    """Current temperature of a city."""
    return {"celsius": 21.5 if city == "Oslo" else 30.0}


def _hi(args: dict[str, str], ctx: object) -> str:
    return f"hi {args['who']}"


say_hi = define_tool(
    name="say-hi",
    description="Say hi.",
    execute=_hi,
    parameters={"who": schema.string(required=True)},
)


@pytest.fixture
async def codemode() -> AsyncIterator[CodeMode]:
    registry = ToolRegistry(ToolsConfig(mode="code"))
    registry.register(weather)
    registry.register(say_hi)
    config = CodeModeConfig(limits=Limits(compute_ms=5_000, max_wall_ms=20_000))
    async with TypeScriptRuntime() as runtime:
        yield CodeMode(registry, runtime, config)


async def test_the_sdk_section_is_typescript(codemode: CodeMode) -> None:
    section = codemode.sdk()
    assert codemode.language == "typescript"
    assert section.text.startswith(TYPESCRIPT_INSTRUCTIONS)
    assert "```typescript\n" in section.text
    assert '"say-hi"(args: { who: string' in section.text
    assert section.names == {"say-hi": "say-hi", "weather": "weather"}
    (run_code,) = codemode.model_tools()
    assert run_code["description"].startswith("Run a TypeScript program")
    assert run_code["parameters"]["properties"]["code"]["description"] == "the TypeScript program"


async def test_run_code_calls_tools_by_their_own_names(codemode: CodeMode) -> None:
    program = (
        "const [w, h] = await Promise.all([tools.weather({ city: 'Oslo' }),"
        " tools['say-hi']({ who: 'you' })]);\nconsole.log(h);\nreturn w.celsius;"
    )
    result = await codemode.run(program)
    assert result.to_dict()["value"] == {"logs": ["hi you"], "result": 21.5}


async def test_a_failed_run_is_code_run_failed_in_program_lines(codemode: CodeMode) -> None:
    result = await codemode.run("const x = 1;\nawait tools['say-hi']({});")
    assert result.error is not None and result.error.code == "CODE_RUN_FAILED"
    assert result.meta is not None
    code_run = result.meta["code_run"]
    assert code_run["kind"] == "exception" and code_run["lineno"] == 2


async def test_sessions_are_refused(codemode: CodeMode) -> None:
    from runtime import RuntimeUsageError

    with pytest.raises(RuntimeUsageError, match="sessions are not available"):
        codemode.session()
