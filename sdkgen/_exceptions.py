"""Exceptions raised by sdkgen.

SdkgenError (base; a ValueError or RuntimeError subclass below)
├── ManifestError      the manifest is not a list of tools sdkgen can read
├── CheckerNotFound    check_program cannot find the type checker executable
└── CheckerFailed      the type checker crashed, timed out or printed what cannot be read
"""

from __future__ import annotations


class SdkgenError(Exception):
    """Base class of every error sdkgen raises."""


class ManifestError(SdkgenError, ValueError):
    """Raised when a manifest item lacks a name, repeats one or holds a non-object schema."""


class CheckerNotFound(SdkgenError, RuntimeError):
    """Raised by check_program when the `ty` checker is not installed; names the package."""


class CheckerFailed(SdkgenError, RuntimeError):
    """Raised by check_program when the checker crashes or times out; a retry may succeed."""
