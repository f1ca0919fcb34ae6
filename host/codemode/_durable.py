"""Code mode's durable runs: the journals of paused runs it keeps, and a resume's decisions."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping

from runtime import Decision, Journal, JournalError

__all__ = ("PausedRuns", "resume_decisions")

#: Paused runs a code mode keeps for ``resume(run_id)`` (the oldest go first).
PAUSED_KEPT = 256


def resume_decisions(
    journal: Journal, approve: bool | None, decisions: Mapping[str, Decision] | None
) -> dict[str, Decision]:
    """The decisions of a resume: ``approve`` for every held call, then ``decisions``."""
    out: dict[str, Decision] = {}
    if approve is not None:
        verdict: Decision = "allow" if approve else "deny"
        out = {call.call_id: verdict for call in journal.pending}
    out.update(decisions or {})
    return out


class PausedRuns:
    """The journals of a code mode's paused runs, by run id (bounded, oldest dropped)."""

    def __init__(self, kept: int = PAUSED_KEPT) -> None:
        self._journals: OrderedDict[str, Journal] = OrderedDict()
        self._kept = kept

    def keep(self, journal: Journal) -> None:
        """Remember a paused run's journal (a later pause of the run replaces it)."""
        self._journals.pop(journal.run_id, None)
        self._journals[journal.run_id] = journal
        while len(self._journals) > self._kept:
            self._journals.popitem(last=False)

    def take(self, run: Journal | str) -> Journal:
        """The journal to resume: ``run`` itself, or the kept one of that run id (forgotten
        here: a resume that pauses again keeps its own)."""
        if isinstance(run, Journal):
            self._journals.pop(run.run_id, None)
            return run
        journal = self._journals.pop(run, None) if isinstance(run, str) else None
        if journal is None:
            raise JournalError(
                f"no paused run {run!r} here (it completed, was resumed, or was forgotten: "
                f"the last {self._kept} are kept); resume it with its journal"
            )
        return journal

    def get(self, run_id: str) -> Journal | None:
        """The kept journal of a paused run, if any."""
        return self._journals.get(run_id)

    def __len__(self) -> int:
        return len(self._journals)
