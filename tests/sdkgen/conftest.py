"""Fixtures for the sdkgen tests: the repository root and the external checkers."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _require(tool: str, path: Path | None) -> Path:
    if path is not None and path.exists():
        return path
    message = f"{tool} is not installed (run scripts/setup)"
    if os.environ.get("CI"):
        pytest.fail(message)
    pytest.skip(message)


@pytest.fixture(scope="session")
def tsc() -> Path:
    """Return node_modules/.bin/tsc; fail under CI when it is missing, else skip."""
    return _require("tsc", ROOT / "node_modules" / ".bin" / "tsc")


@pytest.fixture(scope="session")
def ty() -> Path:
    """Return the ty executable; fail under CI when it is missing, else skip."""
    search = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])
    found = shutil.which("ty", path=search)
    return _require("ty", Path(found) if found else None)


@pytest.fixture(scope="session")
def mypy() -> Path:
    """Return the mypy executable beside this Python."""
    return _require("mypy", Path(sys.executable).parent / "mypy")
