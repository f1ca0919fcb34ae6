"""host.adapters: dsh-code inside agent frameworks, one module per framework.

``host.adapters.smolagents`` (``DshExecutor``), ``host.adapters.pydantic_ai``
(``DshCodeToolset``) and ``host.adapters.langgraph`` (``dsh_eval_fn``) each import their
framework when first used (install the extra: ``pip install 'dsh-code[smolagents]'``,
``[pydantic-ai]``, ``[langgraph]``); importing this package imports none of them.
"""

from __future__ import annotations

from runtime.lowlevel import fixup_module_metadata as _fixup_module_metadata

from ._runtime import shared_runtime

__all__ = ("shared_runtime",)

_fixup_module_metadata(__name__, globals())
