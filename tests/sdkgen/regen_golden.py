"""Write the sdkgen golden files, or with --check fail when regenerating would change a byte.

Run from the repository root: `python -m tests.sdkgen.regen_golden [--check]`.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import sdkgen
from tests.sdkgen.manifests import large, representative

GOLDEN = Path(__file__).parent / "golden"
MANIFESTS = {"representative": representative, "large": large}


def render() -> dict[str, bytes]:
    """Return every golden file's name and bytes, generated now."""
    files: dict[str, bytes] = {}
    for name, make in MANIFESTS.items():
        manifest = make()
        python = sdkgen.python_sdk(manifest)
        typescript = sdkgen.typescript_sdk(manifest)
        meta = {
            "python_names": sdkgen.python_names(manifest),
            "python_sha256": sdkgen.sdk_hash(python),
            "typescript_sha256": sdkgen.sdk_hash(typescript),
        }
        files[f"{name}.pyi.golden"] = python.encode("utf-8")
        files[f"{name}.ts.golden"] = typescript.encode("utf-8")
        meta_text = json.dumps(meta, indent=2, sort_keys=True, ensure_ascii=False) + "\n"
        files[f"{name}.meta.json"] = meta_text.encode("utf-8")
    return files


def main(argv: list[str] | None = None) -> int:
    """Regenerate (or --check) the golden files; return the exit status."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--check", action="store_true", help="fail if any byte would change")
    parser.add_argument("--dir", type=Path, default=GOLDEN, help="golden directory")
    args = parser.parse_args(argv)
    folder: Path = args.dir
    stale = []
    for name, data in sorted(render().items()):
        path = folder / name
        current = path.read_bytes() if path.exists() else None
        if current == data:
            continue
        stale.append(name)
        if not args.check:
            folder.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
    if args.check and stale:
        print(f"golden files out of date: {', '.join(stale)}", file=sys.stderr)
        print("regenerate with: python -m tests.sdkgen.regen_golden", file=sys.stderr)
        return 1
    print(f"{'checked' if args.check else 'wrote'} golden files ({len(stale)} changed)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
