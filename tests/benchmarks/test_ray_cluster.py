"""A real tiny run of benchmarks/ray_cluster.py (opt-in: DSH_BENCH_SMOKE=1): it reports, cleans up."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.cluster
@pytest.mark.bench
@pytest.mark.timeout(300)
def test_a_tiny_run_reports_every_figure_and_leaves_no_ray_process(tmp_path: Path) -> None:
    pytest.importorskip("ray", reason="Ray is not installed: pip install 'dsh-code[ray]'")
    out = tmp_path / "ray.json"
    proc = subprocess.run(
        [
            sys.executable,
            "benchmarks/ray_cluster.py",
            "--runs",
            "3",
            "--seconds",
            "0.3",
            "--concurrency",
            "2",
            "--json",
            str(out),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=280,
        env={**os.environ, "PYTHONWARNINGS": "ignore"},
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert "Ray processes left" not in proc.stderr
    assert "| trivial run |" in proc.stdout and "| 2 nodes 10 calls |" in proc.stdout
    report = json.loads(out.read_text())
    assert report["nodes at overhead"] == 1 and report["nodes at two-node throughput"] == 2
    overhead = report["overhead"]
    for key in ("ray trivial", "local trivial", "ray 10 calls", "local 10 calls"):
        assert overhead[key]["n"] == 3
    assert overhead["ray actor call round trip"]["n"] == 3
    for key in ("local", "1 node", "2 nodes"):
        assert report[f"throughput {key} trivial"]["runs"] > 0
