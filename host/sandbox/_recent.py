"""The last few values by key, the least recently used dropped first (agents repeat programs)."""

from __future__ import annotations

from typing import Generic, TypeVar

__all__ = ("Recent",)

K = TypeVar("K")
V = TypeVar("V")


class Recent(Generic[K, V]):
    """At most ``kept`` values; ``get`` makes one the most recently used."""

    def __init__(self, kept: int = 64) -> None:
        self.kept = kept
        self._items: dict[K, V] = {}

    def get(self, key: K) -> V | None:
        """The value kept for ``key``, if any."""
        value = self._items.pop(key, None)
        if value is not None:
            self._items[key] = value  # most recently used last
        return value

    def put(self, key: K, value: V) -> None:
        """Keep ``value`` for ``key`` (dropping the least recently used past ``kept``)."""
        self._items[key] = value
        if len(self._items) > self.kept:
            del self._items[next(iter(self._items))]
