"""The budget section's arithmetic on fake rows: overshoot as monty is timed, stops, the idle line."""

from __future__ import annotations

import pytest

from benchmarks._budgets import ESTIMATE, Idle, _finish, _row, _settle_beside_target
from benchmarks._common import DSH, Row, Section, Target
from benchmarks._overshoot import BUDGET_MS, HOT, OVER, PLAIN, TRIVIAL, _settle


def test_a_compute_overshoot_is_plain_minus_the_trivial_run() -> None:
    section = Section("budgets", "t", "m")
    compute = _row(section, "Python hot loop", 100, "compute", DSH)
    wall = _row(section, "wall: sleep", 100, "wall", DSH)
    for row, stopped in ((compute, 3), (wall, 2)):
        row.metrics[PLAIN] += [5.0, 6.0]
        row.facts.update(runs=3, stopped=stopped)
    _finish(compute, trivial_ms=4.0)
    _finish(wall, trivial_ms=4.0)
    assert compute.metrics[OVER] == [1.0, 2.0]  # returned - called - budget - trivial p50
    assert wall.metrics[OVER] == [5.0, 6.0]  # a wall budget runs from run() called
    assert (compute.failures, compute.facts["stopped"]) == (0, "3/3")
    assert (wall.failures, wall.facts["stopped"]) == (1, "2/3")
    assert "billed CPU (ms)" not in compute.metrics  # empty metrics are dropped


def test_the_target_rows_subtract_their_own_trivial_p50() -> None:
    rows = {
        HOT: Row(HOT, DSH, "ms", {OVER: [], PLAIN: [10.0, 12.0]}),
        TRIVIAL: Row(TRIVIAL, DSH, "ms", {OVER: [3.0, 4.0, 5.0]}),
    }
    assert _settle(rows) == 4.0
    assert rows[HOT].metrics[OVER] == [6.0, 8.0]
    empty = {
        HOT: Row(HOT, DSH, "ms", {OVER: [], PLAIN: [1.0]}),
        TRIVIAL: Row(TRIVIAL, DSH, "ms", {OVER: []}),
    }
    assert _settle(empty) is None and empty[HOT].metrics[OVER] == []


def test_the_idle_baseline_is_a_fitted_line_never_negative() -> None:
    idle = Idle([(100.0, 1.0), (200.0, 2.0), (300.0, 3.0)])
    assert idle.cost(400) == pytest.approx(4.0)
    assert Idle([(100.0, 5.0), (200.0, 1.0)]).cost(10_000) == 0.0
    assert Idle([(100.0, 2.0), (100.0, 2.0)]).cost(50) == pytest.approx(2.0)  # no spread


def test_the_target_row_shows_the_matrix_settle_estimate_beside_it() -> None:
    section = Section("budgets", "t", "m")
    hot = Row(HOT, DSH, "ms", {OVER: [25.0]}, target=Target("p50", "<=", 2, peer="monty 0.4 ms"))
    matrix = _row(section, "Python hot loop", BUDGET_MS, "compute", DSH)
    matrix.metrics[ESTIMATE] += [1.0, 2.0, 3.0]
    _settle_beside_target([hot, *section.rows])
    assert hot.target is not None
    assert hot.target.peer == (
        "monty 0.4 ms; dsh-code settle after the crossing (matrix, estimate) 2 / 3 ms"
    )
