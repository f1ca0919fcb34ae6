"""Shared pieces of the benchmark harness: the result model, statistics, the machine, features.

Nothing here measures anything by itself: each section module (``_startup``, ``_calls``,
``_compute``, ``_budgets``, ``_heap``, ``_output``, ``_scale``) returns a ``Section`` of
``Row``s, each row a workload run by one system with its raw samples, and ``_report``
turns them into the markdown table, the JSON file and the plots.
"""

from __future__ import annotations

import inspect
import os
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = (
    "DSH",
    "DSH_PREFORK",
    "DSH_TEMPLATE",
    "FLOOR",
    "MONTY",
    "Config",
    "Row",
    "Section",
    "Target",
    "Unavailable",
    "host_cpu_ms",
    "isolation_levels",
    "machine_info",
    "machine_label",
    "mono",
    "pct",
    "prefork_option",
    "runtime_defaults",
    "summarize",
    "template_option",
    "tools_pipeline",
    "workdir_option",
)

DSH = "dsh-code"
DSH_TEMPLATE = "dsh-code (template fork)"
DSH_PREFORK = "dsh-code (pre-forked child)"
FLOOR = "in-process CPython"
MONTY = "pydantic-monty"


@dataclass(frozen=True)
class Config:
    """How much to run: ``quick`` is the small version (well under a minute)."""

    quick: bool
    backend: str = "asyncio"

    def n(self, quick: int, full: int) -> int:
        """A repetition count: ``quick`` in quick mode, ``full`` otherwise."""
        return quick if self.quick else full


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
    """A performance target from DESIGN.md: ``stat op value`` on one metric of a row."""

    stat: Literal["p50", "p95", "max"]
    op: Literal["<=", ">="]
    value: float
    metric: str = "value"

    def text(self, unit: str) -> str:
        return f"{self.stat} {'≤' if self.op == '<=' else '≥'} {self.value:g} {unit}".strip()

    def check(self, samples: list[float]) -> bool | None:
        if not samples:
            return None
        got = summarize(samples)[self.stat]
        return got <= self.value if self.op == "<=" else got >= self.value


@dataclass
class Row:
    """One workload run by one system: raw samples per metric, facts, and a note."""

    workload: str
    system: str
    unit: str
    metrics: dict[str, list[float]] = field(default_factory=dict)
    facts: dict[str, Any] = field(default_factory=dict)
    note: str = ""
    available: bool = True
    target: Target | None = None

    @property
    def samples(self) -> list[float]:
        """The main metric's samples (the first one)."""
        return next(iter(self.metrics.values()), [])

    def target_met(self) -> bool | None:
        if self.target is None or not self.available:
            return None
        return self.target.check(self.metrics.get(self.target.metric, []))

    def to_json(self, keep_samples: int = 20_000) -> dict[str, Any]:
        out: dict[str, Any] = {
            "workload": self.workload,
            "system": self.system,
            "unit": self.unit,
            "available": self.available,
            "metrics": {name: summarize(s) for name, s in self.metrics.items()},
            "facts": self.facts,
            "note": self.note,
        }
        if self.target is not None:
            out["target"] = self.target.text(self.unit)
            out["target_met"] = self.target_met()
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


def machine_info() -> dict[str, Any]:
    """Facts about this machine and moment: cores, CPU model, load average, versions."""
    with open("/proc/loadavg") as f:
        load = [float(x) for x in f.read().split()[:3]]
    return {
        "nproc": len(os.sched_getaffinity(0)),
        "cpu_count": os.cpu_count(),
        "cpu_model": _cpu_model(),
        "load_avg_at_start": load,
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "git_commit": _git_commit(),
        "date_utc": time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime()),
    }


def machine_label(info: dict[str, Any]) -> str:
    """A one-line label for figures: cores, CPU model, load average at start."""
    load = "/".join(f"{x:.2f}" for x in info["load_avg_at_start"])
    return f"{info['nproc']} cores, {info['cpu_model']}, load avg {load} at start, {info['date_utc']} UTC"


def _runtime_params() -> Any:
    from host.sandbox import SubprocessRuntime

    return inspect.signature(SubprocessRuntime).parameters


def has_runtime_option(name: str) -> bool:
    """True if ``SubprocessRuntime`` takes the keyword argument ``name``."""
    return name in _runtime_params()


def _prefork_name() -> str | None:
    params = _runtime_params()
    for name in ("prefork", "preforked", "pre_fork", "prefork_children", "warm_children"):
        if name in params:
            return name
    return None


def prefork_option(count: int = 2) -> dict[str, Any] | None:
    """Keyword arguments that make ``SubprocessRuntime`` keep ``count`` children forked ahead
    of time, or None when this build of the runtime has no such option (feature detection).
    """
    name = _prefork_name()
    return None if name is None else {name: count}


def template_option() -> dict[str, Any]:
    """Keyword arguments that make every run fork a fresh child from the template at run time."""
    name = _prefork_name()
    return {} if name is None else {name: 0}


def runtime_defaults() -> str:
    """``SubprocessRuntime``'s defaults that matter here, as text (for the report)."""
    params = _runtime_params()
    shown = [
        f"{name}={params[name].default!r}"
        for name in ("max_concurrent_runs", _prefork_name())
        if name is not None and name in params
    ]
    return "SubprocessRuntime(" + ", ".join(shown) + ")"


def isolation_levels() -> list[str | None]:
    """The isolation levels to compare in start-up: ``[None]`` (the runtime's only one) when
    ``SubprocessRuntime`` has no ``isolation`` option, else ``["process", "namespaces"]``.
    """
    return ["process", "namespaces"] if "isolation" in _runtime_params() else [None]


def workdir_option(path: str) -> dict[str, Any] | None:
    """Keyword arguments putting run directories under ``path``, or None if not supported."""
    return {"workdir_root": path} if "workdir_root" in _runtime_params() else None


def tools_pipeline() -> tuple[Callable[[], Any], Any] | str:
    """``(registry factory, host.tools module)`` when ``host.tools`` has a registry with an
    ``invoke`` coroutine, else a string saying why not (feature detection).
    """
    try:
        from host import tools
    except Exception as exc:  # the package is being built: any import failure means "not yet"
        return f"host.tools does not import ({type(exc).__name__}: {exc})"
    for name in ("Registry", "ToolRegistry"):
        cls = getattr(tools, name, None)
        if cls is not None and inspect.iscoroutinefunction(getattr(cls, "invoke", None)):
            if not callable(getattr(tools, "define_tool", None)):
                return "host.tools has no define_tool"
            return cls, tools
    return "host.tools has no Registry/ToolRegistry with an async invoke"
