"""The README's benchmark table, rendered from a full run's ``results.json``.

Usage: ``python benchmarks/readme_table.py [RESULTS_JSON] [--write README.md] [--allow-partial]``
(default ``benchmarks/results/results.json``). Prints the block: a line with the commit, the
machine and its load, then one row per target of the run (what, target, p50 / p95 with n and
failed runs, met, the peer's same-run figure). ``--write`` puts it between the README's
``<!-- benchmarks-table:start -->`` and ``<!-- benchmarks-table:end -->`` lines instead. A quick
run or one of some sections (``--only``) is refused unless ``--allow-partial``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._report import fmt, verdict

__all__ = ("END", "START", "main", "partial", "render", "replace_block")

START = "<!-- benchmarks-table:start -->"
END = "<!-- benchmarks-table:end -->"
ROOT = Path(__file__).resolve().parent.parent
DEFAULT = ROOT / "benchmarks" / "results" / "results.json"
#: Every section of a full run, in the harness's order.
ALL_SECTIONS = (
    "startup",
    "calls",
    "compute",
    "budgets",
    "preload",
    "sessions",
    "load",
    "heap",
    "output",
    "flood",
    "scale",
    "resume",
    "tracing",
    "hostile",
)


def _escape(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def partial(data: dict[str, Any]) -> str | None:
    """Why ``data`` is not a full run (quick, or some sections only), or None."""
    meta = data["meta"]
    if meta.get("quick"):
        return "a quick run (--quick)"
    missing = [s for s in ALL_SECTIONS if s not in meta.get("sections_run", [])]
    if missing:
        return f"a run without the section(s) {', '.join(missing)}"
    return None


def _measured(row: dict[str, Any]) -> str:
    target = row["target"]
    stats = row["metrics"].get(target["metric"], {})
    if not row["available"] or not stats.get("n"):
        return "n/a" + (f" ({row['note']})" if row.get("note") else "")
    text = f"{fmt(stats['p50'])} / {fmt(stats['p95'])} {row['unit']} (n {stats['n']}"
    if row.get("failures"):
        text += f", {row['failures']} failed"
    return text + ")"


def _met(target: dict[str, Any]) -> str:
    text = verdict(target["met"])
    if target.get("stretch") is not None:
        text += f" (stretch: {verdict(target.get('stretch_met'))})"
    return text


def _header(data: dict[str, Any]) -> str:
    meta = data["meta"]
    machine = meta["machine"]
    load_start = "/".join(f"{x:.2f}" for x in machine["load_avg_at_start"])
    load_end = "/".join(f"{x:.2f}" for x in meta["load_avg_at_end"])
    monty = meta.get("features", {}).get("pydantic-monty", "not installed")
    kind = "" if partial(data) is None else f" — {partial(data)}, not a full run"
    return (
        f"Latest full run{kind}: commit {machine['git_commit']}, {machine['date_utc']} UTC; "
        f"{machine['nproc']} cores ({machine['cpu_model']}), Python {machine['python']}, load "
        f"average {load_start} at start and {load_end} at end; `{meta['command']}` "
        f"({meta['seconds']:.0f} s, pydantic-monty {monty}). p50 / p95 over n runs; failed "
        "runs are counted apart, never in the figures. Rendered by "
        "`benchmarks/readme_table.py` from the run's `results.json`."
    )


def render(data: dict[str, Any]) -> str:
    """The block: the header line, a blank line, and the table of every target row."""
    lines = [
        _header(data),
        "",
        "| what | target | measured | met | peer in the same run |",
        "|---|---|---|---|---|",
    ]
    for section in data["sections"].values():
        for row in section["rows"]:
            target = row.get("target")
            if target is None:
                continue
            cells = [
                target["what"] or row["workload"],
                target["text"],
                _measured(row),
                _met(target),
                target.get("peer", ""),
            ]
            lines.append("| " + " | ".join(_escape(c) for c in cells) + " |")
    return "\n".join(lines)


def replace_block(readme: str, block: str) -> str:
    """``readme`` with the text between the markers replaced by ``block``."""
    start, end = readme.find(START), readme.find(END)
    if start < 0 or end < start:
        raise ValueError(f"the README has no {START} ... {END} block")
    return readme[: start + len(START)] + "\n" + block + "\n" + readme[end:]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python benchmarks/readme_table.py",
        description="Render the README's benchmark table from a full run's results.json.",
    )
    parser.add_argument("results", nargs="?", default=str(DEFAULT), help=f"default {DEFAULT}")
    parser.add_argument("--write", metavar="README", help="replace the block in this README")
    parser.add_argument(
        "--allow-partial", action="store_true", help="accept a quick run or some sections only"
    )
    args = parser.parse_args(argv)
    try:
        data = json.loads(Path(args.results).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        print(f"cannot read {args.results}: {exc}", file=sys.stderr)
        return 2
    why = partial(data)
    if why is not None and not args.allow_partial:
        print(f"{args.results} is {why}: run `python -m benchmarks` in full", file=sys.stderr)
        return 2
    block = render(data)
    if args.write is None:
        print(block)
        return 0
    path = Path(args.write)
    try:
        path.write_text(replace_block(path.read_text(encoding="utf-8"), block), encoding="utf-8")
    except (OSError, ValueError) as exc:
        print(f"cannot write {path}: {exc}", file=sys.stderr)
        return 2
    print(f"wrote the benchmark table into {path}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
