"""The harness's result model on fake data: percentiles, summaries, targets, rows as JSON."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from benchmarks._common import (
    Row,
    Section,
    Target,
    Unavailable,
    figure,
    pct,
    relative,
    stat,
    summarize,
    trivial_program,
)

samples = st.lists(st.floats(min_value=0, max_value=1e6, allow_nan=False), min_size=1)


def test_pct_is_the_nearest_rank() -> None:
    data = [float(x) for x in range(1, 101)]  # 1 .. 100
    assert pct(data, 0) == 1 and pct(data, 100) == 100
    assert pct(data, 50) == 51  # rank round(0.5 * 99) = 50 (0-based): the value 51
    assert pct(data, 95) == 95
    assert pct([3.0, 1.0, 2.0], 50) == 2.0


@given(samples)
def test_a_summary_is_ordered_and_counts_every_sample(xs: list[float]) -> None:
    s = summarize(xs)
    assert s["n"] == len(xs)
    assert s["min"] <= s["p50"] <= s["max"]
    assert s["min"] <= s["p95"] <= s["max"]
    assert min(xs) == s["min"] and max(xs) == s["max"]


def test_an_empty_summary_has_only_its_count() -> None:
    assert summarize([]) == {"n": 0}


def test_each_trivial_program_is_new_and_knows_its_value() -> None:
    seen = [trivial_program() for _ in range(50)]
    assert len({text for text, _ in seen}) == 50
    for text, value in seen:
        assert eval(text) == value


@pytest.mark.parametrize(
    ("op", "value", "xs", "met"),
    [
        ("<=", 2.0, [1.0, 2.0, 3.0], True),  # p50 = 2
        ("<=", 1.5, [1.0, 2.0, 3.0], False),
        (">=", 2.0, [1.0, 2.0, 3.0], True),
        (">=", 2.5, [1.0, 2.0, 3.0], False),
        ("<=", 2.0, [], None),  # no data
        ("<=", None, [1.0], None),  # no bound
    ],
)
def test_a_target_is_checked_on_its_statistic(
    op: str, value: float | None, xs: list[float], met: bool | None
) -> None:
    target = Target("p50", op, value)  # type: ignore[arg-type]
    assert target.check(xs) is met


def test_a_target_checks_its_own_metric_and_its_stretch() -> None:
    row = Row("w", "s", "ms", {"value": [9.0], "over": [1.0, 1.0, 4.0]})
    row.target = Target("p50", "<=", 2, metric="over", stretch=0.5)
    assert row.target_met() is True
    assert row.stretch_met() is False
    row.target = Target("max", "<=", 2, metric="over")
    assert row.target_met() is False and row.stretch_met() is None


def test_an_unavailable_row_meets_nothing() -> None:
    row = Unavailable("w", "monty", "ms", "not installed", Target("p50", "<=", 1))
    assert row.target_met() is None and stat(row) is None
    assert figure(row, "monty") == "monty: not installed"


def test_a_relative_target_is_made_from_the_reference_row() -> None:
    reference = Row("w", "monty", "ms", {"value": [2.0, 3.0, 4.0]})
    target = relative(
        Target("p50", "<=", None, what="x"),
        1.05,
        reference,
        "monty",
        plus=0.5,
        plus_label="the trivial run",
        stretch_factor=0.5,
    )
    assert target.value == pytest.approx(1.05 * 3.0 + 0.5)
    assert target.stretch == pytest.approx(0.5 * 3.0 + 0.5)
    assert "1.05x monty (3)" in target.basis and "the trivial run (0.5)" in target.basis
    assert target.what == "x"


def test_a_relative_target_without_data_has_no_bound() -> None:
    empty = Row("w", "monty", "ms", {"value": []})
    for reference, plus in (
        (empty, 0.0),
        (None, 0.0),
        (Row("w", "s", "ms", {"value": [1.0]}), None),
    ):
        target = relative(Target("p50", "<=", None), 1.0, reference, "monty", plus=plus)
        assert target.value is None and "no data" in target.basis
        assert target.check([1.0]) is None


def test_failed_runs_are_counted_apart_from_the_samples() -> None:
    row = Row("w", "s", "ms", {"value": [1.0, 2.0]}, failures=3)
    row.target = Target("p50", "<=", 5, what="trivial", peer="monty 1 ms")
    out = row.to_json()
    assert out["failures"] == 3
    assert out["metrics"]["value"]["n"] == 2
    assert out["target"]["met"] is True and out["target"]["what"] == "trivial"
    assert out["target"]["text"] == "p50 ≤ 5 ms" and out["target"]["peer"] == "monty 1 ms"
    json.dumps(Section("k", "t", "m", rows=[row]).to_json())  # JSON-ready


def test_a_target_says_its_bound_basis_and_stretch() -> None:
    target = Target("p50", "<=", 2.4213, basis="1x monty (2.42)", stretch=1.2)
    assert target.text("ms") == "p50 ≤ 2.42 ms (1x monty (2.42)); stretch ≤ 1.2 ms"
    assert Target("p95", ">=", None).text("x") == "p95 ≥ n/a"


def test_figure_gives_p50_and_p95() -> None:
    row = Row("w", "s", "µs", {"value": [1.0, 2.0, 3.0]})
    assert figure(row, "raw") == "raw 2 / 3 µs"
    assert figure(None, "raw") == "raw: no data"
