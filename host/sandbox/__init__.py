"""host.sandbox: the subprocess backend of the code runtime."""

from __future__ import annotations

from host.sandbox._runtime import SubprocessRuntime

__all__ = ("SubprocessRuntime",)

SubprocessRuntime.__module__ = "host.sandbox"
