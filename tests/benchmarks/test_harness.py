"""Smoke test of the benchmark harness: ``python -m benchmarks --quick --only ...`` writes its
files, and the JSON has the keys the report promises (machine facts, p50/p95/max per row).
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_quick_run_writes_markdown_json_and_plots(tmp_path: Path) -> None:
    out = tmp_path / "results"
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
        timeout=110,
        env={**os.environ, "PYTHONWARNINGS": "ignore"},
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]

    markdown = (out / "results.md").read_text()
    assert "## 1. Trivial program end to end" in markdown
    assert "## 6. Output cap" in markdown
    assert "| workload | system |" in markdown

    data = json.loads((out / "results.json").read_text())
    machine = data["meta"]["machine"]
    for key in ("nproc", "cpu_model", "load_avg_at_start", "python"):
        assert key in machine
    assert data["meta"]["quick"] is True
    assert set(data["sections"]) == {"startup", "output"}
    startup = data["sections"]["startup"]["rows"]
    template = [r for r in startup if r["system"].startswith("dsh-code (template fork")]
    assert template and template[0]["available"]
    stats = template[0]["metrics"]["value"]
    assert {"p50", "p95", "max", "n"} <= set(stats)
    assert stats["n"] > 0 and stats["p50"] <= stats["p95"] <= stats["max"]
    assert template[0]["target"].startswith("p50")
    output = data["sections"]["output"]["rows"]
    dsh_floods = [r for r in output if r["system"] == "dsh-code"]
    assert dsh_floods and all(r["facts"]["stopped"].split("/")[0] != "0" for r in dsh_floods)

    if importlib.util.find_spec("matplotlib") is not None:
        assert (out / "latency.png").stat().st_size > 0
    else:
        assert "plots_missing" in data["meta"]


def test_unknown_section_is_refused(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "benchmarks", "--only", "nope", "--out", str(tmp_path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 2
    assert "unknown section" in proc.stdout
