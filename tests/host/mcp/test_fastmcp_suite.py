"""FastMCP's own CodeMode tests (fastmcp 4.2.3's sdist) with DshSandboxProvider as every provider."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

_UPSTREAM = Path(__file__).parent / "fastmcp_suite" / "upstream"
_ROOT = Path(__file__).parents[3]

#: The files as they are in fastmcp-4.2.3.tar.gz (tests/experimental/transforms/), unchanged.
UPSTREAM_FILES = {
    "test_code_mode.py": "d733ea6ef60b1f54bab584584e01c0689f530d5bef8a313d196df13fe5982036",
    "test_code_mode_discovery.py": "efd4ed0aaadb7abd5dedab3a8dbfcab5feb9a02c828cdaa25a56be609d706d77",
    "test_code_mode_search_limits.py": "d49b9516445672bcc8789c3747c952f4b7ac25b995e061814dd0d0acc8eab071",
    "test_code_mode_serialization.py": "d57368a415b9ae8ae6b3176a281bece58e1b0204b19978d70c4e820c99d82180",
    "test_monty_callback_lifecycle.py": "ab95288df8bbc9beda3b171882b5c6d8d94fa0b85d8da3b2aec4ab5da9d1cc71",
}

_LIMITS = "checks MontySandboxProvider's limits dict (Monty's own keys and defaults)"
_PRIVATE = "overrides MontySandboxProvider._run_monty, a private method of the default provider"
#: Tests of the default provider's own API, not of a provider's behaviour; all others must pass.
EXCLUDED = {
    "test_code_mode.py::test_monty_provider_raises_informative_error_when_missing": (
        "checks the ImportError the default provider raises without pydantic-monty"
    ),
    "test_code_mode.py::test_monty_provider_forwards_limits[limits0]": _LIMITS,
    "test_code_mode.py::test_monty_provider_forwards_limits[limits1]": _LIMITS,
    "test_code_mode.py::test_monty_provider_rejects_unsupported_limits[max_allocations]": _LIMITS,
    "test_code_mode.py::test_monty_provider_rejects_unsupported_limits[max_duration_secs]": _LIMITS,
    "test_code_mode.py::test_monty_provider_applies_default_limits": _LIMITS,
    "test_code_mode.py::test_monty_provider_default_limits_are_not_shared_between_instances": _LIMITS,
    "test_code_mode.py::test_monty_provider_cancels_future_when_task_cancelled": _PRIVATE,
    "test_monty_callback_lifecycle.py::test_monty_provider_rejects_callbacks_queued_after_exit": (
        _PRIVATE
    ),
}
#: Every test the files hold, as pytest collects them (the excluded ones included).
COLLECTED = 148

_INI = """[pytest]
filterwarnings =
    error
timeout = 60
"""


@pytest.mark.timeout(600)
def test_fastmcp_code_mode_suite_passes_on_our_provider(tmp_path: Path) -> None:
    tests = tmp_path / "tests"
    tests.mkdir()
    for name, digest in UPSTREAM_FILES.items():
        data = (_UPSTREAM / name).read_bytes()
        assert hashlib.sha256(data).hexdigest() == digest, f"{name} differs from the sdist's"
        shutil.copy(_UPSTREAM / name, tests / name)
    (tmp_path / "pytest.ini").write_text(_INI)
    report = tmp_path / "report.xml"
    deselect = [arg for test in EXCLUDED for arg in ("--deselect", f"tests/{test}")]
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "-p",
            "tests.host.mcp.fastmcp_suite.plugin",
            "--import-mode=importlib",
            "-c",
            str(tmp_path / "pytest.ini"),
            "--rootdir",
            str(tmp_path),
            f"--junitxml={report}",
            *deselect,
            "tests",
        ],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(_ROOT)},
        capture_output=True,
        text=True,
        timeout=540,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout[-8000:] + proc.stderr[-4000:]
    suite = ET.parse(report).getroot().find("testsuite")
    assert suite is not None
    counts = {key: int(suite.get(key, "0")) for key in ("tests", "failures", "errors", "skipped")}
    assert counts == {
        "tests": COLLECTED - len(EXCLUDED),
        "failures": 0,
        "errors": 0,
        "skipped": 0,
    }, proc.stdout[-4000:]
    assert f"{len(EXCLUDED)} deselected" in proc.stdout
