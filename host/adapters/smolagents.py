"""dsh-code as smolagents' code executor: ``CodeAgent(..., executor=DshExecutor())``.

Needs ``pip install 'dsh-code[smolagents]'``; smolagents is imported when an executor is made.
"""

from __future__ import annotations

from runtime.lowlevel import fixup_module_metadata as _fixup_module_metadata

from ._smolagents import DshExecutor

__all__ = ("DshExecutor",)

_fixup_module_metadata(__name__, globals())
