"""Cost of the restricted policy against plain CPython: compile time and run time, median and p95.

Each program is parsed, (restricted,) wrapped into ``async def`` and compiled as the runtime does,
then run with ``asyncio.run`` in this process; the table gives medians, p95 and the ratio
restricted / plain. Usage: ``python benchmarks/restricted_cost.py [--repeat N]``.
"""

from __future__ import annotations

import argparse
import ast
import asyncio
import builtins
import functools
import statistics
import sys
import time
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from runtime._restricted import restrict, restricted_globals

PROGRAMS: dict[str, str] = {
    "trivial (return 1)": "return 1",
    "loop-heavy (dict/list/method calls, 200k iterations)": """
counts = {}
out = []
for i in range(200_000):
    k = i % 97
    counts[k] = counts.get(k, 0) + 1
    out.append(k * 2)
total = 0
for k, v in counts.items():
    total += v * k
return total + len(out)
""",
    "attribute-heavy (class, 100k method calls)": """
class Acc:
    def __init__(self):
        self.total = 0
    def add(self, x):
        self.total = self.total + x
acc = Acc()
for i in range(100_000):
    acc.add(i)
return acc.total
""",
    "sum of squares (1M-element generator)": "return sum(i * i for i in range(1_000_000))",
    "tool-style (gather, comprehension, f-string)": """
import asyncio
async def stat(name):
    return {"name": name, "size": len(name)}
files = [f"file{i}.txt" for i in range(50)]
sizes = await asyncio.gather(*(stat(f) for f in files))
big = sorted((s for s in sizes if s["size"] > 9), key=lambda s: -s["size"])
return f"{len(big)} big files, {sum(s['size'] for s in sizes)} bytes"
""",
}


def _wrap(tree: ast.Module) -> ast.Module:
    func = ast.AsyncFunctionDef(
        name="__program__",
        args=ast.arguments(
            posonlyargs=[], args=[], vararg=None, kwonlyargs=[], kw_defaults=[], defaults=[]
        ),
        body=tree.body,
        decorator_list=[],
        returns=None,
        lineno=1,
        col_offset=0,
    )
    return ast.fix_missing_locations(ast.Module(body=[func], type_ignores=[]))


def compile_plain(source: str) -> types.CodeType:
    return compile(_wrap(ast.parse(source, "<program>")), "<program>", "exec", dont_inherit=True)


def compile_restricted(source: str) -> types.CodeType:
    tree = restrict(ast.parse(source, "<program>"))
    return compile(_wrap(tree), "<program>", "exec", dont_inherit=True)


def run(code: types.CodeType, namespace: dict[str, Any]) -> Any:
    exec(code, namespace)
    return asyncio.run(namespace["__program__"]())


def run_plain(code: types.CodeType) -> Any:
    return run(code, {"__builtins__": builtins})


def run_restricted(code: types.CodeType) -> Any:
    return run(code, restricted_globals())


def _timings(
    plain: Callable[[], object], restricted: Callable[[], object], repeat: int
) -> tuple[list[float], list[float]]:
    """Alternate the two so that load on a noisy machine hits both sides alike."""
    samples: tuple[list[float], list[float]] = ([], [])
    for _ in range(repeat):
        for func, out in ((plain, samples[0]), (restricted, samples[1])):
            start = time.perf_counter()
            func()
            out.append(time.perf_counter() - start)
    return samples


def _p95(samples: list[float]) -> float:
    return sorted(samples)[max(0, round(0.95 * len(samples)) - 1)]


def _row(label: str, samples: tuple[list[float], list[float]], unit: float, name: str) -> str:
    plain, restricted = samples
    p, r = statistics.median(plain), statistics.median(restricted)
    return (
        f"| {label:<52} | {p * unit:>9.3f} | {_p95(plain) * unit:>9.3f} | {r * unit:>9.3f} "
        f"| {_p95(restricted) * unit:>9.3f} | {r / p:>5.2f}x | {name} |"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=15, help="runs per measurement")
    args = parser.parse_args()
    print(f"Python {sys.version.split()[0]}, {args.repeat} repeats; times are median and p95\n")
    header = (
        f"| {'program':<52} | {'plain p50':>9} | {'plain p95':>9} | {'restr p50':>9} "
        f"| {'restr p95':>9} | ratio | unit |"
    )
    print(header)
    print("|" + "|".join("-" * (len(c)) for c in header.split("|")[1:-1]) + "|")
    for label, source in PROGRAMS.items():
        plain_code, restricted_code = compile_plain(source), compile_restricted(source)
        assert run_plain(plain_code) == run_restricted(restricted_code), label
        compile_repeat = args.repeat * 20
        print(
            _row(
                f"compile: {label}"[:52],
                _timings(
                    functools.partial(compile_plain, source),
                    functools.partial(compile_restricted, source),
                    compile_repeat,
                ),
                1e3,
                "ms",
            )
        )
        print(
            _row(
                f"run: {label}"[:52],
                _timings(
                    functools.partial(run_plain, plain_code),
                    functools.partial(run_restricted, restricted_code),
                    args.repeat,
                ),
                1e3,
                "ms",
            )
        )


if __name__ == "__main__":
    main()
