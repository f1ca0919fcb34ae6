"""Tests for sdkgen's front door: __all__, __module__ and a light import."""

from __future__ import annotations
import __future__

import subprocess
import sys
import types

import pytest

import sdkgen


def test_all_matches_the_public_names() -> None:
    for name in sdkgen.__all__:
        getattr(sdkgen, name)
    public = {
        name
        for name in dir(sdkgen)
        if not name.startswith("_")
        and name != "TYPE_CHECKING"
        and not isinstance(getattr(sdkgen, name), types.ModuleType | __future__._Feature)
    }
    assert isinstance(sdkgen.__all__, tuple)
    assert len(set(sdkgen.__all__)) == len(sdkgen.__all__)
    assert public == set(sdkgen.__all__)


@pytest.mark.parametrize("name", sdkgen.__all__)
def test_public_names_live_in_sdkgen(name: str) -> None:
    assert getattr(sdkgen, name).__module__ == "sdkgen"


def test_unknown_attribute_raises() -> None:
    with pytest.raises(AttributeError, match="no_such_name"):
        getattr(sdkgen, "no_such_name")  # noqa: B009


def test_import_is_light() -> None:
    code = (
        "import sys, sdkgen\n"
        "before = sorted(m for m in sys.modules if m.startswith('sdkgen.'))\n"
        "sdkgen.python_sdk([{'name': 'x', 'parameters': {'type': 'object'}}])\n"
        "print(before, 'subprocess' in sys.modules, 'tempfile' in sys.modules)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "[] False False"
