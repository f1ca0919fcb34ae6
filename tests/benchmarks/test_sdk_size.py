"""benchmarks/sdk_size.py: the Python SDK cut into its parts, every line in exactly one."""

from __future__ import annotations

import sdkgen
from benchmarks.sdk_size import _PARTS, _parts
from tests.host.tools import corpus
from tests.sdkgen.manifests import representative


def test_the_parts_are_the_whole_sdk_and_each_line_is_where_it_belongs() -> None:
    for manifest in (corpus.manifest(), representative()):
        sdk = sdkgen.python_sdk(manifest)
        parts = _parts(sdk)
        assert sum(len(text) for text in parts.values()) == len(sdk)
        header, shared, types, signatures, descriptions, docs = (parts[p] for p in _PARTS)
        assert header.startswith("from typing import ") and "class ToolCallError" in header
        assert all(line.startswith(("async def ", "def ")) for line in signatures.splitlines())
        assert all(line.startswith(' """') for line in descriptions.splitlines())
        assert "class " in types and "async def" not in types + docs
    shared = _parts(sdkgen.python_sdk(corpus.manifest()))[_PARTS[1]]
    assert shared.startswith("# Parameters documented once") and "# owner: " in shared
