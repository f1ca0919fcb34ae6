"""host.sandbox: the subprocess backend of the code runtime."""

from __future__ import annotations

from host.sandbox._deno import deno_binary
from host.sandbox._runtime import SubprocessRuntime
from host.sandbox._session import Session
from host.sandbox._template import TemplateStartError
from host.sandbox._typescript import TypeScriptRuntime
from runtime.lowlevel import fixup_module_metadata as _fixup_module_metadata

__all__ = (
    "Session",
    "SubprocessRuntime",
    "TemplateStartError",
    "TypeScriptRuntime",
    "deno_binary",
)

_fixup_module_metadata(__name__, globals())
