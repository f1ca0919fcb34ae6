"""host.codemode: the reserved ``run_code`` tool over a registry and a code runtime."""

from __future__ import annotations

from host.codemode._codemode import (
    DISPATCH_EVENT,
    DISPATCH_START_EVENT,
    INSTRUCTIONS,
    CodeMode,
    CodeModeConfig,
    CodeRunFailed,
    SdkSection,
)
from host.codemode._scheduler import SubCallScheduler

__all__ = (
    "DISPATCH_EVENT",
    "DISPATCH_START_EVENT",
    "INSTRUCTIONS",
    "CodeMode",
    "CodeModeConfig",
    "CodeRunFailed",
    "SdkSection",
    "SubCallScheduler",
)

for _name in ("CodeMode", "CodeModeConfig", "CodeRunFailed", "SdkSection", "SubCallScheduler"):
    globals()[_name].__module__ = "host.codemode"
