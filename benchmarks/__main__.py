"""The harness's command line: run the sections, write results.md, results.json and plots.

Usage: ``.venv/bin/python -m benchmarks [--quick] [--out DIR] [--only SECTION,...]``.
Sections: startup, calls, compute, budgets, preload, sessions, load, heap, output, flood,
scale, resume, tracing, hostile (all by default, in that order). ``--quick``
is a small version (under about a minute); the full run takes several minutes.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any

import anyio

from benchmarks import (
    _budgets,
    _calls,
    _compute,
    _flood,
    _heap,
    _hostile,
    _load,
    _output,
    _preload,
    _resume,
    _scale,
    _sessions,
    _startup,
    _tracing,
)
from benchmarks._common import Config, Section, load_average, machine_info
from benchmarks._peers import monty_version
from benchmarks._plots import matplotlib_missing, plot
from benchmarks._report import to_json, to_markdown

SECTIONS: dict[str, Callable[[Config], Awaitable[Section]]] = {
    "startup": _startup.run,
    "calls": _calls.run,
    "compute": _compute.run,
    "budgets": _budgets.run,
    "preload": _preload.run,
    "sessions": _sessions.run,
    "load": _load.run,
    "heap": _heap.run,
    "output": _output.run,
    "flood": _flood.run,
    "scale": _scale.run,
    "resume": _resume.run,
    "tracing": _tracing.run,
    "hostile": _hostile.run,
}
DEFAULT_OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")


async def _default_isolation() -> str:
    """The isolation level runs of a default ``SubprocessRuntime()`` get on this machine."""
    from host.sandbox import SubprocessRuntime
    from runtime import RunRequest

    async with SubprocessRuntime() as rt:
        result = await rt.run(RunRequest(program="1"))
    return result.stats.isolation if result.stats is not None else "unknown"


def _runtime_defaults() -> str:
    """``SubprocessRuntime``'s defaults that matter here, as text (for the report)."""
    import inspect

    from host.sandbox import SubprocessRuntime

    params = inspect.signature(SubprocessRuntime).parameters
    shown = [
        f"{name}={params[name].default!r}"
        for name in ("max_concurrent_runs", "prefork", "isolation", "use_cgroups")
        if name in params
    ]
    return "SubprocessRuntime(" + ", ".join(shown) + ")"


def _features() -> dict[str, str]:
    version = monty_version()
    plots = matplotlib_missing()
    return {
        "dsh-code rows use the default configuration unless they say otherwise": (
            _runtime_defaults() + f", giving isolation {anyio.run(_default_isolation)!r}"
        ),
        "pydantic-monty": version or "not installed",
        "plots": "matplotlib" if plots is None else "not available (no matplotlib)",
    }


async def _run_all(config: Config, names: list[str], log: Callable[[str], None]) -> list[Section]:
    sections = []
    for name in names:
        log(f"[bench] {name} ...")
        t = time.perf_counter()
        section = await SECTIONS[name](config)
        section.seconds = time.perf_counter() - t
        log(f"[bench] {name} done in {section.seconds:.1f} s")
        sections.append(section)
    return sections


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks",
        description="dsh-code benchmark harness: start-up, binding calls, compute, budgets, "
        "preload, sessions, load, heap cap, output cap, floods, scale, resume, tracing; "
        "pydantic-monty side by side where installed.",
    )
    parser.add_argument("--quick", action="store_true", help="a small version (< ~1 minute)")
    parser.add_argument(
        "--out", default=DEFAULT_OUT, help=f"output directory (default {DEFAULT_OUT})"
    )
    parser.add_argument(
        "--only",
        default="",
        help=f"comma-separated sections to run (default all: {','.join(SECTIONS)})",
    )
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    asked = [n.strip() for n in args.only.split(",") if n.strip()] or list(SECTIONS)
    unknown = [n for n in asked if n not in SECTIONS]
    names = [n for n in SECTIONS if n in asked]  # always in the order
    if unknown:
        print(f"unknown section(s): {', '.join(unknown)}; known: {', '.join(SECTIONS)}")
        return 2
    os.makedirs(args.out, exist_ok=True)
    config = Config(quick=args.quick)
    machine = machine_info()

    def log(text: str) -> None:
        print(text, file=sys.stderr, flush=True)

    started = time.perf_counter()
    sections: list[Section] = anyio.run(_run_all, config, names, log)
    load_end = load_average()
    meta: dict[str, Any] = {
        "machine": machine,
        "load_avg_at_end": load_end,
        "quick": args.quick,
        "sections_run": names,
        "command": shlex.join(
            ["python", "-m", "benchmarks", *(argv if argv is not None else sys.argv[1:])]
        ),
        "seconds": time.perf_counter() - started,
        "features": _features(),
    }
    missing = matplotlib_missing()
    if missing is None:
        meta["plots"] = plot(sections, machine, args.out)
    else:
        meta["plots"] = {}
        meta["plots_missing"] = missing
    with open(os.path.join(args.out, "results.json"), "w") as f:
        json.dump(to_json(meta, sections), f, indent=1)
    markdown = to_markdown(meta, sections)
    with open(os.path.join(args.out, "results.md"), "w") as f:
        f.write(markdown + "\n")
    print(markdown)
    log(f"[bench] wrote {args.out}/results.md, results.json and {len(meta['plots'])} plot(s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
