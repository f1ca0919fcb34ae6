"""Write ``dsh_code/__init__.py``, the one import home, from the packages' own ``__all__``.

``python scripts/gen_dsh_code.py`` rewrites it; ``--check`` exits 1 if that would change a
byte (the core packages give every public name; the others their entry points, below).
"""

from __future__ import annotations

import importlib
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TARGET = ROOT / "dsh_code" / "__init__.py"

#: The packages dsh_code gives whole (every name of their ``__all__``).
WHOLE = ("runtime", "host.sandbox", "host.codemode", "host.tools")
#: The entry points of the others.
ENTRY_POINTS = {
    "runtime.testing": "InProcessRuntime",
    "host.adapters": "shared_runtime",
    "host.adapters.smolagents": "DshExecutor",
    "host.adapters.pydantic_ai": "DshCodeToolset",
    "host.adapters.langgraph": "dsh_eval_fn",
    "host.mcp": (
        "DshSandboxProvider McpError McpServeConfig McpServerSpec McpServers "
        "elicitation_ask_handler"
    ),
    "host.cluster": "ClusterError RayRuntime",
    "host.telemetry": "TelemetrySettings configure trace_run",
    "sdkgen": "python_sdk typescript_sdk",
}

_HEAD = '''\
"""dsh_code: the one import home of dsh-code (``from dsh_code import SubprocessRuntime, tool``).

Every name is imported on first use (PEP 562): ``import dsh_code`` loads nothing but this
module, and a framework only when its adapter is used. The names live in the repository's
packages (``runtime``, ``host.*``, ``sdkgen``), which stay importable; this module re-exports
them, the same objects. Written by ``scripts/gen_dsh_code.py``: do not edit by hand.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

'''

_TAIL = """
_HOMES = {name: home for home, names in _NAMES_BY_HOME.items() for name in names.split()}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'dsh_code' has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
"""


def _kind(name: str) -> int:
    # as ruff orders names: CONSTANTS, then Classes, then functions
    return 0 if name.isupper() else 1 if name[:1].isupper() else 2


def _import_key(name: str) -> tuple[int, str]:
    return (_kind(name), name.lower())  # isort: case apart


def _all_key(name: str) -> tuple[int, str]:
    return (_kind(name), name)  # RUF022: case matters


def _homes() -> dict[str, list[str]]:
    sys.path.insert(0, str(ROOT))
    homes = {home: list(importlib.import_module(home).__all__) for home in WHOLE}
    homes.update({home: names.split() for home, names in ENTRY_POINTS.items()})
    return {home: sorted(names, key=_import_key) for home, names in homes.items()}


def render() -> str:
    """The module's text."""
    homes = _homes()
    out = [_HEAD, "if TYPE_CHECKING:\n"]
    for home in sorted(homes):
        out.append(f"    from {home} import (\n")
        out.extend(f"        {name},\n" for name in homes[home])
        out.append("    )\n")
    every = sorted((n for names in homes.values() for n in names), key=_all_key)
    out.append("\n__all__ = (\n")
    out.extend(f'    "{name}",\n' for name in every)
    out.append(")\n\n#: Each name's public module: the names it gives, space-separated.\n")
    out.append("_NAMES_BY_HOME = {\n")
    for home, names in homes.items():
        lines = textwrap.wrap(" ".join(names), 84, break_on_hyphens=False)
        if len(lines) == 1:
            out.append(f'    "{home}": "{lines[0]}",\n')
        else:
            out.append(f'    "{home}": (\n')
            for i, line in enumerate(lines):
                out.append(f'        "{line}{" " if i < len(lines) - 1 else ""}"\n')
            out.append("    ),\n")
    out.append("}")
    out.append(_TAIL)
    return "".join(out)


def main(argv: list[str]) -> int:
    text = render()
    if "--check" in argv:
        if TARGET.read_text(encoding="utf-8") != text:
            sys.stderr.write(f"{TARGET} is stale: run python scripts/gen_dsh_code.py\n")
            return 1
        return 0
    TARGET.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
