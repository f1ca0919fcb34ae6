"""The whole texts of runs a model read cut: kept, bounded, as resources a client can read.

When what a ``run_code`` call gives the model passes its budget, the model reads a head and
a tail; the whole text is kept here under an unguessable ``dsh-code://output/...`` URI (the
line standing for what was left out names it) for ``resources/read``. At most
``max_outputs`` texts of at most ``max_bytes`` together are kept: the oldest go first, and a
text larger than all of it is not kept.
"""

from __future__ import annotations

import secrets
from typing import Final

__all__ = ("OUTPUT_URI_PREFIX", "KeptOutputs")

OUTPUT_URI_PREFIX: Final = "dsh-code://output/"


class KeptOutputs:
    """Whole run texts by URI, oldest dropped first past ``max_outputs`` or ``max_bytes``."""

    def __init__(self, max_outputs: int, max_bytes: int) -> None:
        self.max_outputs = max_outputs
        self.max_bytes = max_bytes
        self._texts: dict[str, tuple[str, int]] = {}  # in the order kept
        self._bytes = 0

    def keep(self, text: str) -> str | None:
        """Keep ``text``; the URI to read it at, or None if it is too big to keep."""
        size = len(text.encode())
        if size > self.max_bytes or self.max_outputs < 1:
            return None
        uri = OUTPUT_URI_PREFIX + secrets.token_urlsafe(18)  # a capability: not listed
        self._texts[uri] = (text, size)
        self._bytes += size
        while len(self._texts) > self.max_outputs or self._bytes > self.max_bytes:
            oldest = next(iter(self._texts))
            self._bytes -= self._texts.pop(oldest)[1]
        return uri

    def read(self, uri: str) -> str | None:
        """The text kept at ``uri``; None if there is none (never kept, or dropped since)."""
        found = self._texts.get(uri)
        return None if found is None else found[0]

    def where(self, text: str) -> str | None:
        """Keep ``text`` and say where it is, for the line that stands for what was cut."""
        uri = self.keep(text)
        return None if uri is None else f"the MCP resource {uri}"
