"""dsh-code as pydantic-ai's code mode: ``Agent(model, toolsets=[DshCodeToolset(toolset)])``.

Needs ``pip install 'dsh-code[pydantic-ai]'``; pydantic-ai is imported on first use of a name.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from host.adapters._pydantic_ai import DshCodeToolset

__all__ = ("DshCodeToolset",)


def __getattr__(name: str) -> object:
    if name not in __all__:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    try:
        module = importlib.import_module("host.adapters._pydantic_ai")
    except ImportError as exc:
        raise ImportError(
            "host.adapters.pydantic_ai needs pydantic-ai: pip install 'dsh-code[pydantic-ai]'"
        ) from exc
    value: object = getattr(module, name)
    value.__module__ = __name__
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
