"""dsh-code as langgraph-codeact's sandbox: ``create_codeact(model, tools, dsh_eval_fn())``.

Install with ``pip install 'dsh-code[langgraph]'``; this module itself imports no framework.
"""

from __future__ import annotations

from runtime.lowlevel import fixup_module_metadata as _fixup_module_metadata

from ._langgraph import dsh_eval_fn

__all__ = ("dsh_eval_fn",)

_fixup_module_metadata(__name__, globals())
