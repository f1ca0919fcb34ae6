"""Exceptions of host.cluster.

The tree::

    RuntimeUsageError (runtime)
    └── ClusterError    the cluster cannot take runs: Ray is not installed, the cluster
                        cannot be reached, or no node became ready in time

A program's own failures, and a node that dies under a run, are ``RunResult.error``
(kind ``died``), never an exception.
"""

from __future__ import annotations

from runtime import RuntimeUsageError

__all__ = ("ClusterError",)


class ClusterError(RuntimeUsageError):
    """Raised by ``RayRuntime`` when the cluster cannot take runs; the runtime stays usable
    (a later run tries again) until ``aclose()``."""
