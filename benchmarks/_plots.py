"""PNG plots of the harness's results (needs matplotlib, the ``bench`` extra).

- ``latency.png``: the distribution of a trivial run's end-to-end latency per system, and
  of one binding call's round trip per system (box plots on a log axis);
- ``overshoot.png``: budget overshoot per budget — ``over`` (``run()`` returned - called -
  budget, minus the trivial run for compute budgets) and compute billed past the budget,
  median with a bar up to p95, one line per workload and system (the matrix rows).

Every figure's title says what it measures and the machine (cores, CPU model, load average).
"""

from __future__ import annotations

import os
from typing import Any

from benchmarks._common import Section, machine_label, summarize

__all__ = ("matplotlib_missing", "plot")


def matplotlib_missing() -> str | None:
    """Why plots cannot be drawn, or None when matplotlib is there."""
    try:
        import matplotlib  # type: ignore[import-not-found, unused-ignore]  # noqa: F401
    except ImportError:
        return "matplotlib is not installed (pip install 'dsh-code[bench]'): no PNG plots"
    return None


def _boxes(ax: Any, rows: list[tuple[str, list[float]]], xlabel: str, title: str) -> None:
    rows = [(label, samples) for label, samples in rows if samples]
    if not rows:
        ax.set_visible(False)
        return
    ax.boxplot(
        [samples for _, samples in rows],
        vert=False,
        whis=(5, 95),
        showfliers=True,
        flierprops={"markersize": 2, "alpha": 0.4},
    )
    ax.set_yticks(range(1, len(rows) + 1))
    ax.set_yticklabels([f"{label} (n={len(s)})" for label, s in rows], fontsize=7)
    ax.set_xscale("log")
    ax.set_xlabel(xlabel)
    ax.set_title(title, fontsize=9)
    ax.grid(axis="x", which="both", alpha=0.3)


def _latency(plt: Any, sections: dict[str, Section], label: str, path: str) -> bool:
    startup = sections.get("startup")
    calls = sections.get("calls")
    if startup is None and calls is None:
        return False
    fig, axes = plt.subplots(2, 1, figsize=(14, 9))
    if startup is not None:
        _boxes(
            axes[0],
            [(f"{r.system}: {r.workload}", r.samples) for r in startup.rows if r.available],
            "milliseconds (log)",
            "Trivial run end to end (back to back, after 2 ms, after 50 ms): run() called → result",
        )
    else:
        axes[0].set_visible(False)
    if calls is not None:
        _boxes(
            axes[1],
            [
                (
                    f"{r.system} [{'outside' if 'outside' in r.workload else 'in program'}, "
                    f"{'blocking' if 'blocking' in r.workload else 'awaited'}]",
                    r.samples,
                )
                for r in calls.rows
                if r.available and r.workload.startswith(("one awaited", "one blocking"))
            ],
            "microseconds (log)",
            "One binding call round trip (program → host → program); whiskers p5-p95",
        )
    else:
        axes[1].set_visible(False)
    fig.suptitle(f"Latency distributions — {label}", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def _overshoot(plt: Any, budgets: Section | None, label: str, path: str) -> bool:
    if budgets is None:
        return False
    metrics = [
        ("over (ms)", "run() returned - called - budget (- trivial run, compute) (ms)"),
        ("billed over (ms)", "CPU billed past the budget (ms)"),
    ]
    fig, axes = plt.subplots(1, 2, figsize=(14, 6.5))
    rows = [r for r in budgets.rows if r.available and "budget_ms" in r.facts]
    workloads = list(dict.fromkeys(str(r.facts["workload"]) for r in rows))
    systems = list(dict.fromkeys(r.system for r in rows))
    all_budgets = sorted({int(r.facts["budget_ms"]) for r in rows})
    colors = plt.get_cmap("tab10")
    count = len(workloads) * len(systems)
    for ax, (metric, ylabel) in zip(axes, metrics, strict=True):
        for w, workload in enumerate(workloads):
            for s_index, system in enumerate(systems):
                points = []
                for row in rows:
                    if row.system == system and row.facts["workload"] == workload:
                        samples = row.metrics.get(metric, [])
                        if samples:
                            stats = summarize(samples)
                            points.append((int(row.facts["budget_ms"]), stats["p50"], stats["p95"]))
                if not points:
                    continue
                points.sort()
                shift = 1 + 0.012 * (w * len(systems) + s_index - count / 2)
                peer = "monty" in system
                ax.errorbar(
                    [p[0] * shift for p in points],
                    [p[1] for p in points],
                    yerr=[[0.0] * len(points), [max(p[2] - p[1], 0.0) for p in points]],
                    fmt=("s--" if peer else "o-"),
                    color=colors(w % 10),
                    capsize=3,
                    markersize=4,
                    alpha=0.8 if peer else 1.0,
                    label=f"{workload} [{system}]",
                )
        if metric.startswith("over"):
            ax.axhline(2, color="red", linewidth=0.8, linestyle=":", label="target p50 ≤ 2 ms")
        ax.set_xscale("log")
        ax.set_xticks(all_budgets)
        ax.set_xticklabels([str(b) for b in all_budgets])
        ax.minorticks_off()
        ax.set_yscale("symlog", linthresh=1)
        ax.set_xlabel("budget (ms, log scale)")
        ax.set_ylabel(ylabel + " — median, bar to p95")
        ax.grid(alpha=0.3)
    axes[0].set_title("Overshoot: how long after the budget run() returned", fontsize=9)
    axes[1].set_title("Compute billed past the budget", fontsize=9)
    found: dict[str, Any] = {}
    for ax in axes:
        for handle, text in zip(*ax.get_legend_handles_labels(), strict=True):
            found.setdefault(text, handle)
    fig.legend(list(found.values()), list(found), loc="lower center", ncol=3, fontsize=7)
    fig.suptitle(f"Budget overshoot per budget — {label}", fontsize=9)
    fig.tight_layout(rect=(0, 0.18, 1, 0.95))
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def plot(sections: list[Section], machine: dict[str, Any], out_dir: str) -> dict[str, str]:
    """Draw the plots into ``out_dir``; returns file name -> what it shows."""
    import matplotlib  # type: ignore[import-not-found, unused-ignore]

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # type: ignore[import-not-found, unused-ignore]

    by_key = {s.key: s for s in sections}
    label = machine_label(machine)
    drawn: dict[str, str] = {}
    if _latency(plt, by_key, label, os.path.join(out_dir, "latency.png")):
        drawn["latency.png"] = "latency distributions: trivial run end to end; one binding call"
    if _overshoot(plt, by_key.get("budgets"), label, os.path.join(out_dir, "overshoot.png")):
        drawn["overshoot.png"] = "budget overshoot per budget: settle overshoot and billed CPU"
    return drawn
