"""Fixtures for host.codemode: asyncio as anyio runs it, as plain ``asyncio.run`` runs it, and trio."""

from __future__ import annotations

import pytest

from tests.conftest import ALL_BACKENDS


@pytest.fixture(params=ALL_BACKENDS)
def anyio_backend(request: pytest.FixtureRequest) -> object:
    """The anyio backend of the test."""
    return request.param
