"""Demo: a program that calls real bindings (read-only file system access) in a fresh child.

Run it with ``scripts/demo`` (sets up the venv first) or ``.venv/bin/python examples/demo.py``.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import anyio

from dsh_code import Limits, RunRequest, SubprocessRuntime, ToolCallError

ROOT = Path(__file__).resolve().parent.parent


def _inside(path: str) -> Path:
    target = (ROOT / path).resolve()
    if not target.is_relative_to(ROOT):
        raise ToolCallError("tools.read_file", f"{path!r} is outside the project", "DENIED")
    return target


async def list_dir(args: Any) -> Any:
    """List a directory of this project (names, sorted; directories end with '/')."""
    target = _inside(args.get("path", "."))
    return sorted(p.name + ("/" if p.is_dir() else "") for p in target.iterdir())


async def read_file(args: Any) -> Any:
    """Read a text file of this project."""
    target = _inside(args["path"])
    if not target.is_file():
        raise ToolCallError("tools.read_file", f"no such file: {args['path']}", "TOOL_ERROR")
    return await anyio.Path(target).read_text(encoding="utf-8", errors="replace")


async def count_words(args: Any) -> Any:
    """Count the words of a text."""
    return len(str(args["text"]).split())


PROGRAM = """\
import asyncio

files = [f for f in await tools.list_dir(path="runtime") if f.endswith(".py")]
print(f"found {len(files)} modules in runtime/")
texts = await asyncio.gather(*(tools.read_file(path=f"runtime/{f}") for f in files))
counts = await asyncio.gather(*(tools.count_words(text=t) for t in texts))
for name, n in sorted(zip(files, counts), key=lambda x: -x[1])[:3]:
    print(f"  {name}: {n} words")
try:
    await tools.read_file(path="../../etc/passwd")
except ToolCallError as e:
    print(f"refused as expected: {e.message} ({e.code})")
return {"modules": len(files), "words": sum(counts)}
"""


async def main() -> int:
    bindings = {
        "tools.list_dir": list_dir,
        "tools.read_file": read_file,
        "tools.count_words": count_words,
    }
    program = Path(sys.argv[1]).read_text() if len(sys.argv) > 1 else PROGRAM
    print("--- program ---")
    print(program.rstrip())
    print("--- logs (streamed from the child) ---")
    async with SubprocessRuntime() as rt:
        request = RunRequest(
            program=program,
            bindings=bindings,
            limits=Limits(compute_ms=5_000, max_wall_ms=30_000),
            on_log=lambda line: print("  |", line, flush=True),
        )
        result = await rt.run(request)
    print("--- result ---")
    if result.error is not None:
        print(f"failed ({result.error.kind}): {result.error.message}")
        return 1
    print(result.value)
    stats = result.stats
    if stats is not None:
        print(
            f"({stats.calls} binding calls, {stats.compute_ms:.1f} ms compute, {stats.wall_ms:.1f} ms wall)"
        )
    return 0


if __name__ == "__main__":
    sys.exit(anyio.run(main))
