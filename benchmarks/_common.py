"""Shared pieces of the benchmark harness: the result model, statistics, targets, the machine.

Nothing here measures anything by itself: each section module returns a ``Section`` of
``Row``s, each row a workload run by one system with its raw samples and its failed runs
(counted apart, never in the samples), and ``_report`` turns them into the markdown table
and the JSON document. A ``Target`` is one line of issue 15's table (or DESIGN.md's): a
statistic of one metric compared with a bound, the bound absolute or made from a same-run
figure of another row (``relative``).
"""

from __future__ import annotations

import itertools
import os
import platform
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field, replace
from typing import Any, Literal

__all__ = (
    "DSH",
    "FLOOR",
    "MONTY",
    "MONTY_FRESH",
    "MONTY_REUSED",
    "Config",
    "Row",
    "Section",
    "Target",
    "Unavailable",
    "figure",
    "host_cpu_ms",
    "load_average",
    "machine_info",
    "machine_label",
    "mono",
    "pct",
    "relative",
    "stat",
    "summarize",
    "trivial_program",
)

DSH = "dsh-code"
FLOOR = "in-process CPython"
MONTY = "pydantic-monty"
MONTY_FRESH = f"{MONTY} (fresh worker per run)"
MONTY_REUSED = f"{MONTY} (reused worker)"

Stat = Literal["p50", "p95", "max"]
Op = Literal["<=", ">="]


@dataclass(frozen=True)
class Config:
    """How much to run: ``quick`` is the small version (about a minute)."""

    quick: bool

    def n(self, quick: int, full: int) -> int:
        """A repetition count: ``quick`` in quick mode, ``full`` otherwise."""
        return quick if self.quick else full


_programs = itertools.count(1)


def trivial_program() -> tuple[str, int]:
    """A trivial program never run before in this process (``f"{i} + 1"``) and its value:
    a fresh text per run, so no compile cache answers it."""
    i = next(_programs)
    return f"{i} + 1", i + 1


def pct(samples: list[float], q: float) -> float:
    """The q-th percentile (0-100) by nearest rank."""
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))]


def summarize(samples: list[float]) -> dict[str, float]:
    """Median, p95, max, min, mean and count of a sample list (empty: just ``n`` = 0)."""
    if not samples:
        return {"n": 0}
    return {
        "p50": statistics.median(samples),
        "p95": pct(samples, 95),
        "max": max(samples),
        "min": min(samples),
        "mean": statistics.fmean(samples),
        "n": len(samples),
    }


@dataclass(frozen=True)
class Target:
    """``stat op value`` on one metric of a row; ``value`` None when it could not be made
    (a relative target whose reference has no data)."""

    stat: Stat
    op: Op
    value: float | None
    metric: str = "value"
    what: str = ""
    """The target's name in issue 15's table (the README table's first column)."""
    basis: str = ""
    """How a relative value was made, e.g. "1.0x pydantic-monty fresh worker (2.71 ms)"."""
    stretch: float | None = None
    peer: str = ""
    """The peer's same-run figure, as text."""

    def text(self, unit: str) -> str:
        sign = "≤" if self.op == "<=" else "≥"
        bound = "n/a" if self.value is None else f"{_num(self.value)} {unit}".strip()
        out = f"{self.stat} {sign} {bound}"
        if self.basis:
            out += f" ({self.basis})"
        if self.stretch is not None:
            out += f"; stretch {sign} {_num(self.stretch)} {unit}".rstrip()
        return out

    def _holds(self, got: float, bound: float | None) -> bool | None:
        if bound is None:
            return None
        return got <= bound if self.op == "<=" else got >= bound

    def check(self, samples: list[float]) -> bool | None:
        """Met, not met, or None (no samples, or no bound)."""
        return self._holds(summarize(samples)[self.stat], self.value) if samples else None

    def check_stretch(self, samples: list[float]) -> bool | None:
        if not samples or self.stretch is None:
            return None
        return self._holds(summarize(samples)[self.stat], self.stretch)


def _num(value: float) -> str:
    return f"{value:.3g}" if abs(value) < 100 else f"{value:.0f}"


@dataclass
class Row:
    """One workload run by one system: raw samples per metric, failed runs, facts, a note."""

    workload: str
    system: str
    unit: str
    metrics: dict[str, list[float]] = field(default_factory=dict)
    facts: dict[str, Any] = field(default_factory=dict)
    note: str = ""
    available: bool = True
    target: Target | None = None
    failures: int = 0
    """Runs that did not do what the workload expects; their times are in no metric."""

    @property
    def samples(self) -> list[float]:
        """The main metric's samples (the first one)."""
        return next(iter(self.metrics.values()), [])

    def target_met(self) -> bool | None:
        if self.target is None or not self.available:
            return None
        return self.target.check(self.metrics.get(self.target.metric, []))

    def stretch_met(self) -> bool | None:
        if self.target is None or not self.available:
            return None
        return self.target.check_stretch(self.metrics.get(self.target.metric, []))

    def to_json(self, keep_samples: int = 20_000) -> dict[str, Any]:
        out: dict[str, Any] = {
            "workload": self.workload,
            "system": self.system,
            "unit": self.unit,
            "available": self.available,
            "failures": self.failures,
            "metrics": {name: summarize(s) for name, s in self.metrics.items()},
            "facts": self.facts,
            "note": self.note,
        }
        if self.target is not None:
            out["target"] = {
                "what": self.target.what,
                "text": self.target.text(self.unit),
                "stat": self.target.stat,
                "op": self.target.op,
                "value": self.target.value,
                "metric": self.target.metric,
                "stretch": self.target.stretch,
                "peer": self.target.peer,
                "met": self.target_met(),
                "stretch_met": self.stretch_met(),
            }
        out["samples"] = {name: s[:keep_samples] for name, s in self.metrics.items()}
        return out


def Unavailable(
    workload: str, system: str, unit: str, why: str, target: Target | None = None
) -> Row:
    """A row for a system that cannot run this workload, saying why (and the target it has)."""
    return Row(workload, system, unit, available=False, note=why, target=target)


@dataclass
class Section:
    """One section of the report: a title, what it measures, rows, notes, and timing."""

    key: str
    title: str
    measures: str
    rows: list[Row] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    metric_names: list[str] = field(default_factory=lambda: ["value"])
    fact_columns: list[str] = field(default_factory=list)
    seconds: float = 0.0

    def add(self, row: Row) -> Row:
        self.rows.append(row)
        return row

    def to_json(self) -> dict[str, Any]:
        return {
            "title": self.title,
            "measures": self.measures,
            "seconds": round(self.seconds, 2),
            "notes": self.notes,
            "rows": [row.to_json() for row in self.rows],
        }


def stat(row: Row | None, name: Stat = "p50", metric: str = "value") -> float | None:
    """One statistic of a row's metric, or None when the row has no samples."""
    if row is None or not row.available:
        return None
    samples = row.metrics.get(metric, [])
    return summarize(samples)[name] if samples else None


def figure(row: Row | None, label: str = "", metric: str = "value") -> str:
    """A row's p50 / p95 as text for a target's peer column ("label 2.71 / 3.20 ms")."""
    name = label or (row.system if row is not None else "")
    p50, p95 = stat(row, "p50", metric), stat(row, "p95", metric)
    if row is None or p50 is None or p95 is None:
        why = row.note if row is not None and not row.available else "no data"
        return f"{name}: {why}"
    return f"{name} {_num(p50)} / {_num(p95)} {row.unit}"


def relative(
    target: Target,
    factor: float,
    reference: Row | None,
    label: str,
    *,
    plus: float | None = 0.0,
    plus_label: str = "",
    stretch_factor: float | None = None,
) -> Target:
    """``target`` with its bound made from a same-run figure: ``factor`` x the reference
    row's statistic (its ``target.stat`` of ``value``), plus ``plus`` (None: unknown)."""
    ref = stat(reference, target.stat)
    if ref is None or plus is None:
        return replace(target, value=None, basis=f"{factor:g}x {label}: no data")
    extra = f" + {plus_label} ({_num(plus)})" if plus_label else ""
    return replace(
        target,
        value=factor * ref + plus,
        basis=f"{factor:g}x {label} ({_num(ref)}){extra}",
        stretch=None if stretch_factor is None else stretch_factor * ref + plus,
    )


def mono() -> float:
    """CLOCK_MONOTONIC in seconds: the clock a child can read too (shared across processes)."""
    return time.clock_gettime(time.CLOCK_MONOTONIC)


def host_cpu_ms() -> float:
    """CPU time of this (host) process, every thread, in milliseconds."""
    return time.process_time() * 1000


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def _git_commit() -> str:
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    try:
        out = subprocess.run(
            ["git", "-C", root, "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            timeout=5,
            check=False,
        )
        return out.stdout.strip() or "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def load_average() -> list[float]:
    """The 1, 5 and 15 minute load averages."""
    with open("/proc/loadavg") as f:
        return [float(x) for x in f.read().split()[:3]]


def machine_info() -> dict[str, Any]:
    """Facts about this machine and moment: cores, CPU model, load average, versions."""
    return {
        "nproc": len(os.sched_getaffinity(0)),
        "cpu_count": os.cpu_count(),
        "cpu_model": _cpu_model(),
        "load_avg_at_start": load_average(),
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "git_commit": _git_commit(),
        "date_utc": time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime()),
    }


def machine_label(info: dict[str, Any]) -> str:
    """A one-line label for figures: cores, CPU model, load average at start."""
    load = "/".join(f"{x:.2f}" for x in info["load_avg_at_start"])
    return f"{info['nproc']} cores, {info['cpu_model']}, load avg {load} at start, {info['date_utc']} UTC"
