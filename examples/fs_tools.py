"""Bindings over the local file system, read-only, rooted at the current directory.

Use with ``dsh-code run PROGRAM --bindings examples/fs_tools.py``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

from dsh_code import tool

ROOT = Path.cwd().resolve()


def _inside(path: str) -> Path:
    target = (ROOT / path).resolve()
    if not target.is_relative_to(ROOT):
        raise PermissionError(f"{path!r} is outside {ROOT}")
    return target


@tool(concurrency_safe=True)
def list_dir(
    path: Annotated[str, "A directory, relative to the working directory."] = ".",
) -> list[str]:
    """List a directory: names sorted, directories with a trailing '/'."""
    target = _inside(path)
    if not target.is_dir():
        raise NotADirectoryError(f"not a directory: {path}")
    return sorted(p.name + ("/" if p.is_dir() else "") for p in target.iterdir())


@tool(concurrency_safe=True)
def read_file(
    path: Annotated[str, "A file, relative to the working directory."], max_bytes: int = 1_000_000
) -> str:
    """Read a UTF-8 text file (at most max_bytes; undecodable bytes are replaced)."""
    target = _inside(path)
    if not target.is_file():
        raise FileNotFoundError(f"no such file: {path}")
    with target.open("rb") as f:
        return f.read(max_bytes).decode("utf-8", errors="replace")


@tool(concurrency_safe=True)
def count_words(text: str) -> int:
    """Count the whitespace-separated words of a text."""
    return len(text.split())
