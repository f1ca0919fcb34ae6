"""Measure the code-mode SDK's size against native JSON function definitions, and check time.

For the large MCP-like manifest of the sdkgen tests (60 tools), prints bytes (and tokens when
`tiktoken` works offline) of the Python and TypeScript SDKs next to the native definitions
(OpenAI-style `{"type": "function", ...}` objects, and MCP `tools/list` items that also carry
`outputSchema`), each as pretty (`json.dumps` defaults) and compact JSON; then the median
time of one `sdkgen.check_program` call. Run from the repository root:
`python benchmarks/sdk_size.py`.
"""

from __future__ import annotations

import importlib
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import sdkgen
from tests.sdkgen.manifests import large, representative


def _tokenizer() -> Callable[[str], int] | None:
    try:
        tiktoken: Any = importlib.import_module("tiktoken")
        encoding = tiktoken.get_encoding("o200k_base")
    except Exception:  # not installed, or its vocabulary cannot be fetched offline
        return None
    return lambda text: len(encoding.encode(text))


def _native(manifest: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        {
            "type": "function",
            "function": {
                "name": tool["name"],
                "description": tool.get("description", ""),
                "parameters": tool["inputSchema"],
            },
        }
        for tool in manifest
    ]


def _mcp(manifest: list[dict[str, Any]]) -> list[dict[str, Any]]:
    keys = ("name", "description", "inputSchema", "outputSchema")
    return [{key: tool[key] for key in keys if key in tool} for tool in manifest]


def _check_time(runs: int = 7) -> float:
    program = 'page = await tools.list_issue(owner="o", repo="r")\nreturn page["total_count"]\n'
    manifest = large()
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        sdkgen.check_program(program, manifest)
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def main() -> None:
    """Print the size table and the check time."""
    manifest = large()
    count = _tokenizer()
    pretty, compact = {}, {}
    for label, data in (
        ("native functions", _native(manifest)),
        ("MCP tools/list", _mcp(manifest)),
    ):
        pretty[label] = json.dumps(data)
        compact[label] = json.dumps(data, separators=(",", ":"))
    rows = [
        ("Python SDK", sdkgen.python_sdk(manifest)),
        ("TypeScript SDK", sdkgen.typescript_sdk(manifest)),
        ("native functions, pretty JSON", pretty["native functions"]),
        ("native functions, compact JSON", compact["native functions"]),
        ("MCP tools/list, pretty JSON", pretty["MCP tools/list"]),
        ("MCP tools/list, compact JSON", compact["MCP tools/list"]),
    ]
    base = len(pretty["native functions"].encode())
    base_compact = len(compact["native functions"].encode())
    print(f"manifest: {len(manifest)} tools (tests/sdkgen/manifests.py: large)")
    print(f"{'text':34} {'bytes':>8} {'vs native':>10} {'vs compact':>11} {'tokens':>8}")
    for label, text in rows:
        size = len(text.encode())
        tokens = str(count(text)) if count else "n/a"
        print(f"{label:34} {size:>8} {size / base:>9.0%} {size / base_compact:>10.0%} {tokens:>8}")
    if count is None:
        print("tokens: n/a (tiktoken is not installed or cannot load its vocabulary offline)")
    try:
        median = _check_time()
    except sdkgen.CheckerNotFound as exc:
        print(f"check_program: skipped ({exc})")
        return
    print(f"check_program (ty, large manifest): median {median * 1000:.0f} ms of 7 runs")
    small = representative()
    started = time.perf_counter()
    sdkgen.check_program("return await tools.import_()", small)
    print(
        f"check_program (ty, representative manifest): {(time.perf_counter() - started) * 1000:.0f} ms"
    )


if __name__ == "__main__":
    main()
