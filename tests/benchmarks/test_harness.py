"""The harness's command line: sections refused or run (a real quick run only with DSH_BENCH_SMOKE=1)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.__main__ import SECTIONS, parse_args
from benchmarks.readme_table import ALL_SECTIONS

ROOT = Path(__file__).resolve().parents[2]


def test_the_readme_table_knows_every_section_in_order() -> None:
    assert tuple(SECTIONS) == ALL_SECTIONS


def test_arguments_are_parsed() -> None:
    args = parse_args(["--quick", "--only", "startup,calls", "--out", "/tmp/x"])
    assert args.quick and args.only == "startup,calls" and args.out == "/tmp/x"


def test_an_unknown_section_is_refused(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "benchmarks", "--only", "nope", "--out", str(tmp_path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 2
    assert "unknown section(s): nope" in proc.stdout
    assert list(tmp_path.iterdir()) == []


@pytest.mark.bench
@pytest.mark.timeout(600)
def test_a_real_quick_run_writes_its_report_and_the_readme_table(tmp_path: Path) -> None:
    out = tmp_path / "results"
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "benchmarks",
            "--quick",
            "--only",
            "startup,output",
            "--out",
            str(out),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=580,
        env=env,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert "## 1. Trivial run end to end" in (out / "results.md").read_text()
    data = json.loads((out / "results.json").read_text())
    assert data["meta"]["quick"] is True and set(data["sections"]) == {"startup", "output"}
    rows = data["sections"]["startup"]["rows"]
    default = [r for r in rows if r["system"] == "dsh-code, SubprocessRuntime()"]
    assert len(default) == 3 and all(r["metrics"]["value"]["n"] > 0 for r in default)
    table = subprocess.run(
        [
            sys.executable,
            "benchmarks/readme_table.py",
            str(out / "results.json"),
            "--allow-partial",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        check=False,
    )
    assert table.returncode == 0, table.stderr
    assert "| trivial run, back to back" in table.stdout
