"""host.codemode: the reserved ``run_code`` tool over a registry and a code runtime."""

from __future__ import annotations

from host.codemode._codemode import (
    DISPATCH_EVENT,
    DISPATCH_START_EVENT,
    CodeMode,
    CodeModeConfig,
    CodeModeSession,
    SdkSection,
)
from host.codemode._output import (
    MIN_MODEL_OUTPUT_BYTES,
    ModelText,
    cut_to_budget,
    failure_text,
    left_out_line,
    success_text,
)
from host.codemode._render import CodeRunFailed
from host.codemode._scheduler import SubCallScheduler
from host.codemode._texts import (
    INSTRUCTIONS,
    PERSISTENT_NOTE,
    SYNC_INSTRUCTIONS,
    TYPESCRIPT_INSTRUCTIONS,
)
from runtime.lowlevel import fixup_module_metadata as _fixup_module_metadata

__all__ = (
    "DISPATCH_EVENT",
    "DISPATCH_START_EVENT",
    "INSTRUCTIONS",
    "MIN_MODEL_OUTPUT_BYTES",
    "PERSISTENT_NOTE",
    "SYNC_INSTRUCTIONS",
    "TYPESCRIPT_INSTRUCTIONS",
    "CodeMode",
    "CodeModeConfig",
    "CodeModeSession",
    "CodeRunFailed",
    "ModelText",
    "SdkSection",
    "SubCallScheduler",
    "cut_to_budget",
    "failure_text",
    "left_out_line",
    "success_text",
)

_fixup_module_metadata(__name__, globals())
