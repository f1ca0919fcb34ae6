"""Shared fixtures: the anyio backends every async test runs under."""

from __future__ import annotations

import pytest


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    """Run each anyio test under asyncio and under trio."""
    return str(request.param)
