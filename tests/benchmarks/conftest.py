"""The ``bench`` mark: real benchmark runs, skipped unless ``DSH_BENCH_SMOKE=1`` (CI runs none)."""

from __future__ import annotations

import os

import pytest

OPT_IN = "DSH_BENCH_SMOKE"


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", f"bench: runs a real benchmark (opt-in: {OPT_IN}=1; CI runs none)"
    )


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    if os.environ.get(OPT_IN) == "1":
        return
    skip = pytest.mark.skip(reason=f"a real benchmark run: opt in with {OPT_IN}=1")
    for item in items:
        if item.get_closest_marker("bench") is not None:
            item.add_marker(skip)
