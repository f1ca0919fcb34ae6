"""Deno, the engine of TypeScript runs: where its binary is, and how each part starts it.

The binary comes from the ``deno`` distribution on the package index (a pinned dependency),
so installing dsh-code brings it: no system Node or Deno, nothing downloaded at run time.
Every Deno we start has no permissions at all (``--no-prompt``: a missing one throws, never
asks), resolves no remote, npm or JSR import, reads no configuration or lock file, and gets
an empty environment.
"""

from __future__ import annotations

import functools
import os

from runtime import RuntimeEnvironmentError

__all__ = (
    "CHILD_ENV",
    "CHILD_SCRIPT",
    "FRONTEND_SCRIPT",
    "child_argv",
    "deno_binary",
    "frontend_argv",
)

_HERE = os.path.dirname(os.path.abspath(__file__))
#: The child's bootstrap: what runs in a TypeScript run's contained process.
CHILD_SCRIPT = os.path.join(os.path.dirname(_HERE), os.pardir, "runtime", "_typescript_child.js")
CHILD_SCRIPT = os.path.normpath(CHILD_SCRIPT)
#: The host's front end: strips a program's types, finds its syntax errors.
FRONTEND_SCRIPT = os.path.join(_HERE, "_typescript_frontend.js")

#: A child's whole environment. Deno wants a cache directory, from DENO_DIR or the uid's home
#: (a run's uid has none): one that cannot exist (the root is read-only), so nothing is
#: cached and nothing read from a cache.
CHILD_ENV = {"DENO_DIR": "/nonexistent/dsh-code-deno"}

#: No permission, no prompt, nothing from outside, no configuration found by walking up.
_LOCKED_DOWN = (
    "run",
    "--quiet",
    "--no-prompt",
    "--no-remote",
    "--no-npm",
    "--no-config",
    "--no-lock",
    "--deny-read",
    "--deny-write",
    "--deny-net",
    "--deny-env",
    "--deny-sys",
    "--deny-run",
    "--deny-ffi",
    "--deny-import",
)


@functools.cache
def deno_binary() -> str:
    """The Deno binary the ``deno`` package installed (raises ``RuntimeEnvironmentError``)."""
    try:
        from deno import find_deno_bin

        path = os.fsdecode(find_deno_bin())
    except (ImportError, OSError) as exc:
        raise RuntimeEnvironmentError(
            f"TypeScript programs need the Deno binary of the `deno` package: {exc} "
            "(reinstall dsh-code, which depends on it)"
        ) from exc
    if not os.access(path, os.X_OK):
        raise RuntimeEnvironmentError(f"the Deno binary {path} cannot be executed")
    return os.path.realpath(path)


def child_argv(heap_mb: int) -> list[str]:
    """The command a TypeScript child becomes: the bootstrap under a V8 heap cap of
    ``heap_mb`` MiB (V8 ends the process past it; the host reports kind ``memory``)."""
    return [
        deno_binary(),
        *_LOCKED_DOWN,
        f"--v8-flags=--max-old-space-size={heap_mb}",
        CHILD_SCRIPT,
    ]


def frontend_argv() -> list[str]:
    """The command of the host's front end (parses programs; runs none)."""
    return [deno_binary(), *_LOCKED_DOWN, "--v8-flags=--max-old-space-size=256", FRONTEND_SCRIPT]
