"""Fake harness results (sections, rows, the meta of a run) for the rendering tests."""

from __future__ import annotations

from typing import Any

from benchmarks._common import Row, Section, Target, Unavailable
from benchmarks._report import to_json
from benchmarks.readme_table import ALL_SECTIONS


def meta(*, quick: bool = False, sections: tuple[str, ...] = ALL_SECTIONS) -> dict[str, Any]:
    return {
        "machine": {
            "nproc": 2,
            "cpu_count": 2,
            "cpu_model": "Fake CPU",
            "load_avg_at_start": [0.5, 0.25, 0.125],
            "python": "3.11.7",
            "platform": "Linux",
            "git_commit": "abc1234",
            "date_utc": "2026-12-01 12:00:00",
        },
        "load_avg_at_end": [1.5, 1.0, 0.75],
        "quick": quick,
        "sections_run": list(sections),
        "command": "python -m benchmarks",
        "seconds": 480.4,
        "features": {"pydantic-monty": "1.4.0"},
    }


def sections() -> list[Section]:
    startup = Section("startup", "1. Trivial run end to end", "Milliseconds.")
    startup.add(
        Row(
            "trivial run, back to back",
            "dsh-code, SubprocessRuntime()",
            "ms",
            {"value": [1.0, 2.0, 3.0, 4.0]},
            failures=2,
            target=Target(
                "p50",
                "<=",
                2.0,
                what="trivial run, back to back",
                basis="1x monty fresh (2)",
                stretch=1.0,
                peer="monty fresh worker 2 / 3 ms",
            ),
        )
    )
    startup.add(Row("trivial run, back to back", "monty | fresh", "ms", {"value": [2.0]}))
    startup.add(
        Unavailable(
            "trivial run, back to back",
            "pydantic-monty (reused worker)",
            "ms",
            "not installed",
            Target("p50", "<=", 1.0, what="never measured"),
        )
    )
    budgets = Section(
        "budgets",
        "4. Budget enforcement",
        "Overshoot.",
        metric_names=["over (ms)", "billed CPU (ms)"],
        fact_columns=["stopped"],
    )
    budgets.add(
        Row(
            "hot loop",
            "dsh-code",
            "ms",
            {"over (ms)": [0.5, 1.5], "billed CPU (ms)": [101.0, 102.0]},
            facts={"stopped": "2/2"},
            target=Target("p50", "<=", 2, metric="over (ms)", what="compute overshoot"),
        )
    )
    return [startup, budgets]


def results(**kwargs: Any) -> dict[str, Any]:
    """A results.json document as the harness writes it."""
    return to_json(meta(**kwargs), sections())
