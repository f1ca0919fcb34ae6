"""Rendering of the harness's results: the markdown table and the JSON document.

The markdown has a targets summary (each target of issue 15's table, the row it applies to,
the measured statistic, met or not, the stretch, the peer's same-run figure) and one table
per section: a row per workload and system, p50 / p95 / max of each metric, the sample
count, the failed runs (never in the samples), the target and notes.
"""

from __future__ import annotations

from typing import Any

from benchmarks._common import Row, Section, machine_label, summarize

__all__ = ("fmt", "to_json", "to_markdown", "verdict")


def fmt(value: float | None) -> str:
    """A number with precision to suit its size."""
    if value is None:
        return "—"
    size = abs(value)
    if size >= 100:
        return f"{value:.0f}"
    if size >= 10:
        return f"{value:.1f}"
    if size >= 1:
        return f"{value:.2f}"
    return f"{value:.3f}"


def _cell(samples: list[float]) -> str:
    if not samples:
        return "—"
    s = summarize(samples)
    return f"{fmt(s['p50'])} / {fmt(s['p95'])} / {fmt(s['max'])}"


def _met(row: Row) -> str:
    met = row.target_met()
    if row.target is None:
        return ""
    text = row.target.text(row.unit)
    return f"{text}: {'met' if met else 'not met' if met is not None else 'no data'}"


def _escape(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _section_table(section: Section) -> list[str]:
    multi = len(section.metric_names) > 1
    head = ["workload", "system", *section.fact_columns]
    if multi:
        head += [f"{name}: p50 / p95 / max" for name in section.metric_names]
    else:
        head += ["p50", "p95", "max"]
    head += ["n", "failed", "unit", "target", "notes"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for row in section.rows:
        cells = [_escape(row.workload), _escape(row.system)]
        cells += [str(row.facts.get(name, "")) for name in section.fact_columns]
        if not row.available:
            width = len(section.metric_names) if multi else 3
            cells += ["n/a"] * width + ["0", "", row.unit, _met(row), _escape(row.note)]
            lines.append("| " + " | ".join(cells) + " |")
            continue
        if multi:
            cells += [_cell(row.metrics.get(name, [])) for name in section.metric_names]
        else:
            s = summarize(row.samples)
            cells += [fmt(s.get("p50")), fmt(s.get("p95")), fmt(s.get("max"))]
        extra = {k: v for k, v in row.facts.items() if k in ("calls_per_s_at_p50",)}
        note = row.note + "".join(f"; {k}: {v}" for k, v in extra.items())
        cells += [
            str(len(row.samples)),
            str(row.failures),
            row.unit,
            _met(row),
            _escape(note.strip("; ")),
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def verdict(met: bool | None) -> str:
    """ "yes", "no" or "n/a" (no data)."""
    return "yes" if met else ("no" if met is not None else "n/a")


def _targets(sections: list[Section]) -> list[str]:
    lines = [
        "| what | target | system | measured | n | failed | met | stretch met | peer, same run |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for section in sections:
        for row in section.rows:
            target = row.target
            if target is None:
                continue
            samples = row.metrics.get(target.metric, []) if row.available else []
            measured = (
                f"{fmt(summarize(samples).get(target.stat))} {row.unit}" if samples else "n/a"
            )
            stretch = verdict(row.stretch_met()) if target.stretch is not None else ""
            cells = [
                target.what or row.workload,
                target.text(row.unit),
                row.system,
                measured,
                str(len(samples)),
                str(row.failures),
                verdict(row.target_met()),
                stretch,
                target.peer,
            ]
            lines.append("| " + " | ".join(_escape(c) for c in cells) + " |")
    return lines


def to_markdown(meta: dict[str, Any], sections: list[Section]) -> str:
    """The whole report as markdown."""
    machine = meta["machine"]
    out = [
        "# dsh-code benchmarks",
        "",
        f"Machine: {machine_label(machine)}; Python {machine['python']}; commit "
        f"{machine['git_commit']}. Load average at end: "
        f"{'/'.join(f'{x:.2f}' for x in meta['load_avg_at_end'])}.",
        "",
        f"Command: `{meta['command']}` ({'quick' if meta['quick'] else 'full'} run, "
        f"{meta['seconds']:.0f} s). Features: "
        + "; ".join(f"{k}: {v}" for k, v in meta["features"].items())
        + ".",
        "",
        "Every figure is p50 / p95 / max over n samples (nearest-rank p95); the machine is "
        "shared and noisy.",
        "",
        *(
            [
                f"**Warning:** the 1-minute load average at start "
                f"({machine['load_avg_at_start'][0]:.1f}) was above the core count "
                f"({machine['nproc']}): other work competed for the CPUs, and latencies are "
                "inflated accordingly.",
                "",
            ]
            if machine["load_avg_at_start"][0] > machine["nproc"]
            else []
        ),
        "## Targets (issue 15's table)",
        "",
        *_targets(sections),
        "",
    ]
    for section in sections:
        out += [f"## {section.title}", "", section.measures + f" ({section.seconds:.0f} s)", ""]
        out += _section_table(section)
        if section.notes:
            out += ["", *[f"- {_escape(note)}" for note in section.notes]]
        out.append("")
    if meta.get("plots"):
        out += ["## Plots", "", *[f"- `{name}`: {what}" for name, what in meta["plots"].items()]]
        out.append("")
    elif meta.get("plots_missing"):
        out += ["## Plots", "", meta["plots_missing"], ""]
    return "\n".join(out)


def to_json(meta: dict[str, Any], sections: list[Section]) -> dict[str, Any]:
    """The whole report as a JSON-ready dict: ``meta`` and ``sections`` by key."""
    return {"meta": meta, "sections": {s.key: s.to_json() for s in sections}}
