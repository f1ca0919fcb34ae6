"""Measure what the model reads: the code-mode SDK against the native tool definitions, in
tokens (o200k, from the `bpe-openai` package, which ships its vocabulary), on real MCP
servers' tools (the corpus in `tests/host/tools/data`: everything, filesystem and memory, then
all four with github), beside the Anthropic (`{name, description, input_schema}`) and OpenAI
(`{"type": "function", ...}`) formats as compact JSON; bytes too; what each part of the Python
SDK costs (the tools' own words, descriptions and parameter docs, against the code around
them); the Python SDK's ratio to the Anthropic format on both sets (target: at most 60 %).
Then the median time of one `sdkgen.check_program` call. Run from the repository root:
`python benchmarks/sdk_size.py`.
"""

from __future__ import annotations

import importlib
import json
import statistics
import sys
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import sdkgen
from tests.host.tools import corpus


def _tokenizer() -> Callable[[str], int]:
    with warnings.catch_warnings():  # bpe-openai loads its data with a deprecated importlib call
        warnings.simplefilter("ignore", DeprecationWarning)
        encoding = importlib.import_module("bpe_openai").get_encoding("o200k_base")
    return lambda text: len(encoding.encode(text))


def _compact(data: Any) -> str:
    return json.dumps(data, separators=(",", ":"), ensure_ascii=False)


def _anthropic(manifest: list[dict[str, Any]]) -> str:
    return _compact(
        [
            {"name": t["name"], "description": t["description"], "input_schema": t["parameters"]}
            for t in manifest
        ]
    )


def _openai(manifest: list[dict[str, Any]]) -> str:
    return _compact(
        [
            {
                "type": "function",
                "function": {
                    "name": t["name"],
                    "description": t["description"],
                    "parameters": t["parameters"],
                },
            }
            for t in manifest
        ]
    )


#: The parts of the Python SDK, by what a line of it is.
_PARTS = (
    "header (imports, JsonValue, ToolCallError)",
    "parameter docs said once",
    "types (TypedDicts, aliases)",
    "signatures",
    "tool descriptions",
    "parameter and result docs",
)


def _parts(sdk: str) -> dict[str, str]:
    """The Python SDK's text cut into its parts (each line goes to one)."""
    header, shared, types, signatures, descriptions, docs = _PARTS
    parts = dict.fromkeys(_PARTS, "")
    part, in_doc = header, False
    for line in sdk.splitlines(keepends=True):
        if in_doc:  # a tool's docstring, after its description
            parts[docs] += line
            in_doc = not line.rstrip().endswith('"""')
            continue
        if line.startswith(("async def ", "def ")):
            part = signatures
        elif line.startswith(("from ", "JsonValue:", "class ToolCallError")):
            part = header
        elif line.startswith("# ") and part in (header, shared):
            part = shared
        elif part == signatures and line.startswith(" "):  # the docstring opens
            parts[descriptions] += line
            in_doc = line.count('"""') == 1
            continue
        elif not (line.startswith(" ") and part != shared):  # else: a block's body goes on
            part = types
        parts[part] += line
    return parts


def _check_time(manifest: list[dict[str, Any]], runs: int = 5) -> float:
    program = 'page = await tools.filesystem__read_text_file(path="/etc/hosts")\nreturn page\n'
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        sdkgen.check_program(program, manifest)
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def main() -> None:
    """Print the size tables and the check time."""
    count = _tokenizer()
    ratios = []
    for servers in (("everything", "filesystem", "memory"), corpus.SERVERS):
        manifest = corpus.manifest(servers)
        rows = [
            ("Python SDK", sdkgen.python_sdk(manifest)),
            ("TypeScript SDK", sdkgen.typescript_sdk(manifest)),
            ("Anthropic format, compact JSON", _anthropic(manifest)),
            ("OpenAI format, compact JSON", _openai(manifest)),
        ]
        native = count(rows[2][1])
        print(f"{len(manifest)} tools of {', '.join(servers)}")
        print(f"  {'text':32} {'tokens':>7} {'vs Anthropic':>13} {'bytes':>7}")
        for label, text in rows:
            tokens = count(text)
            print(f"  {label:32} {tokens:>7} {tokens / native:>12.0%} {len(text.encode()):>7}")
        print("  the Python SDK's parts:")
        for label, text in _parts(rows[0][1]).items():
            tokens = count(text)
            print(f"    {label:42} {tokens:>7} {tokens / native:>12.0%}")
        ratios.append((len(manifest), count(rows[0][1]) / native))
    shown = ", ".join(f"{n} tools {ratio:.1%}" for n, ratio in ratios)
    met = "met" if all(ratio <= 0.60 for _, ratio in ratios) else "not met"
    print(f"Python SDK / Anthropic format: {shown} (target <= 60 % on both: {met})")
    try:
        median = _check_time(corpus.manifest())
    except sdkgen.CheckerNotFound as exc:
        print(f"check_program: skipped ({exc})")
        return
    print(f"check_program (ty, 62 tools): median {median * 1000:.0f} ms of 5 runs")


if __name__ == "__main__":
    main()
