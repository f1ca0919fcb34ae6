"""``ClusterRunStats``: a run's figures, plus what the cluster did with it."""

from __future__ import annotations

from runtime import RunStats

__all__ = ("ClusterRunStats",)


class ClusterRunStats(RunStats, frozen=True, kw_only=True):
    """``RunStats`` of a run on a cluster; ``node`` is the id of the node it ran on."""

    retried_from: str | None = None
    """The node the run went to first, when that node died before the run started there
    and the run was sent to this one instead (at most once)."""
