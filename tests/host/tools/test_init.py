"""The public surface of host.tools: exports, their module name, and a light import."""

from __future__ import annotations

import subprocess
import sys
import types

import host.tools


def test_all_matches_the_public_names() -> None:
    public = {
        name
        for name, value in vars(host.tools).items()
        if not name.startswith("_")
        and not isinstance(value, types.ModuleType)
        and name != "annotations"
    }
    assert isinstance(host.tools.__all__, tuple)
    assert len(set(host.tools.__all__)) == len(host.tools.__all__)
    assert set(host.tools.__all__) == public


def test_exported_classes_and_functions_read_host_tools() -> None:
    for name in host.tools.__all__:
        value = getattr(host.tools, name)
        if isinstance(value, type | types.FunctionType):
            assert value.__module__ == "host.tools", name


def test_import_does_not_drag_in_other_packages() -> None:
    code = (
        "import sys, host.tools\n"
        "bad = [m for m in ('host.sandbox', 'host.codemode', 'sdkgen', 'typer', 'rich',"
        " 'jsonschema', 'hypothesis', 'trio') if m in sys.modules]\n"
        "print(bad)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert out.stdout.strip() == "[]"
