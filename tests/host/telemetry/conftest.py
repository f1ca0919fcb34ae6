"""Fixtures of the telemetry tests: spans and metrics in memory, a runtime, code mode over it."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import anyio
import pytest

from host.codemode import CodeMode, CodeModeConfig
from host.sandbox import SubprocessRuntime
from host.tools import ToolRegistry, ToolsConfig, tool
from runtime import Limits
from tests.conftest import ALL_BACKENDS
from tests.host.telemetry.support import Recorded


@pytest.fixture(params=ALL_BACKENDS)
def anyio_backend(request: pytest.FixtureRequest) -> object:
    """Spans under asyncio as anyio runs it, as plain ``asyncio.run`` runs it, and trio."""
    return request.param


@pytest.fixture
def recorded() -> Iterator[Recorded]:
    """Our spans and metrics, in memory, for the test."""
    with Recorded() as found:
        yield found


@pytest.fixture
async def runtime() -> AsyncIterator[SubprocessRuntime]:
    """A default runtime, closed after the test."""
    async with SubprocessRuntime() as rt:
        yield rt


@tool(concurrency_safe=True)
async def add(a: int, b: int) -> int:
    """Add two integers."""
    await anyio.sleep(0.01)
    return a + b


@tool
def secret_word(word: str) -> str:
    """Say a word back."""
    return word


@tool(timeout_ms=50)
async def slow() -> int:
    """Take longer than its timeout."""
    await anyio.sleep(5)
    return 1


@pytest.fixture
def codemode(runtime: SubprocessRuntime) -> CodeMode:
    """Code mode over the runtime, with ``add``, ``secret_word`` and ``slow``."""
    registry = ToolRegistry(ToolsConfig(mode="code"))
    for definition in (add, secret_word, slow):
        registry.register(definition)
    return CodeMode(registry, runtime, CodeModeConfig(limits=Limits(compute_ms=10_000)))
