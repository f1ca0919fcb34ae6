"""The report's markdown and JSON rendered from fake sections: columns, failed runs, targets."""

from __future__ import annotations

import json

from benchmarks._report import fmt, to_json, to_markdown, verdict
from tests.benchmarks import fake


def test_numbers_keep_a_precision_to_suit_their_size() -> None:
    assert [fmt(x) for x in (1234.5, 12.345, 1.2345, 0.12345)] == ["1234", "12.3", "1.23", "0.123"]
    assert fmt(None) == "—"


def test_verdicts() -> None:
    assert [verdict(v) for v in (True, False, None)] == ["yes", "no", "n/a"]


def test_the_markdown_has_the_machine_the_targets_and_a_table_per_section() -> None:
    md = to_markdown(fake.meta(), fake.sections())
    assert "commit abc1234" in md and "load avg 0.50/0.25/0.12 at start" in md
    assert "## Targets (issue 15's table)" in md
    assert "## 1. Trivial run end to end" in md and "## 4. Budget enforcement" in md
    lines = md.splitlines()
    head = next(line for line in lines if line.startswith("| workload | system | p50"))
    assert head == "| workload | system | p50 | p95 | max | n | failed | unit | target | notes |"
    dsh = next(line for line in lines if line.startswith("| trivial run, back to back | dsh-code"))
    # p50 of 1..4 is 2.5, n counts samples only, the 2 failed runs in their own column
    assert dsh.startswith("| trivial run, back to back | dsh-code, SubprocessRuntime() | 2.50 |")
    assert "| 4 | 2 | ms |" in dsh and "not met" in dsh
    assert "monty \\| fresh" in md  # a pipe in a cell is escaped


def test_the_targets_table_names_each_target_with_its_peer() -> None:
    md = to_markdown(fake.meta(), fake.sections())
    rows = [
        line for line in md.splitlines() if line.startswith("| trivial run, back to back | p50")
    ]
    assert rows == [
        "| trivial run, back to back | p50 ≤ 2 ms (1x monty fresh (2)); stretch ≤ 1 ms | "
        "dsh-code, SubprocessRuntime() | 2.50 ms | 4 | 2 | no | no | monty fresh worker 2 / 3 ms |"
    ]
    never = next(line for line in md.splitlines() if line.startswith("| never measured |"))
    assert "| n/a | 0 | 0 | n/a |" in never


def test_a_multi_metric_section_shows_each_metric_and_its_facts() -> None:
    md = to_markdown(fake.meta(), fake.sections())
    head = next(
        line for line in md.splitlines() if line.startswith("| workload | system | stopped")
    )
    assert "over (ms): p50 / p95 / max" in head and "billed CPU (ms): p50 / p95 / max" in head
    row = next(line for line in md.splitlines() if line.startswith("| hot loop |"))
    assert "| 2/2 | 1.00 / 1.50 / 1.50 | 102 / 102 / 102 |" in row


def test_a_warning_when_the_machine_was_busy() -> None:
    meta = fake.meta()
    meta["machine"]["load_avg_at_start"] = [3.5, 1.0, 1.0]
    assert "**Warning:**" in to_markdown(meta, fake.sections())
    assert "**Warning:**" not in to_markdown(fake.meta(), fake.sections())


def test_the_json_has_every_row_its_failures_and_its_raw_samples() -> None:
    doc = json.loads(json.dumps(to_json(fake.meta(), fake.sections())))
    assert list(doc["sections"]) == ["startup", "budgets"]
    row = doc["sections"]["startup"]["rows"][0]
    assert row["failures"] == 2 and row["samples"]["value"] == [1.0, 2.0, 3.0, 4.0]
    assert row["target"]["met"] is False and row["target"]["stretch_met"] is False
