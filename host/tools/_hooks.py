"""The registry's hook lists (one typed list per pipeline stage) and its named events."""

from __future__ import annotations

import itertools
import logging
from typing import Generic, NamedTuple, TypeVar

from ._call import AskHandler, ExecuteWrapper, Guard, Observer, PostExecuteHook, PreExecuteHook
from ._config import Disposer

__all__ = ("Events", "HookList", "Hooks")

_log = logging.getLogger("host.tools")

H = TypeVar("H")


class _Entry(NamedTuple, Generic[H]):
    order: int
    seq: int
    hook: H
    timed_only: bool


class HookList(Generic[H]):
    """One stage's hooks, low ``order`` first, then in the order they were added.

    A snapshot is kept until the list changes: the pipeline reads one on every call.
    """

    __slots__ = ("_entries", "_seq", "_snapshots")

    def __init__(self) -> None:
        self._seq = itertools.count()
        self._entries: list[_Entry[H]] = []
        self._snapshots: dict[bool, tuple[H, ...]] = {}

    def add(self, hook: H, order: int = 0, *, timed_only: bool = False) -> Disposer:
        """Add ``hook``; ``timed_only``: it only matters for a tool with a ``timeout_ms``."""
        entry = _Entry(order, next(self._seq), hook, timed_only)
        entries = self._entries
        entries.append(entry)
        entries.sort(key=lambda item: (item.order, item.seq))
        self._snapshots.clear()

        def dispose() -> None:
            if entry in entries:
                entries.remove(entry)
                self._snapshots.clear()

        return dispose

    def snapshot(self, *, timed: bool = True) -> tuple[H, ...]:
        """The hooks in order (for an untimed tool, without the ``timed_only`` ones)."""
        # Every call used to copy the list; an immutable snapshot rebuilt on change is the same.
        snapshot = self._snapshots.get(timed)
        if snapshot is None:
            snapshot = tuple(e.hook for e in self._entries if timed or not e.timed_only)
            self._snapshots[timed] = snapshot
        return snapshot


class Hooks:
    """The hooks of every pipeline stage, and the host's handler of ``Ask`` decisions."""

    __slots__ = ("ask_handler", "guards", "post_execute", "pre_execute", "wrappers")

    def __init__(self, ask_handler: AskHandler | None = None) -> None:
        self.pre_execute: HookList[PreExecuteHook] = HookList()
        self.guards: HookList[Guard] = HookList()
        self.wrappers: HookList[ExecuteWrapper] = HookList()
        self.post_execute: HookList[PostExecuteHook] = HookList()
        self.ask_handler = ask_handler


class Events:
    """Named events with synchronous observers; an observer's exception is logged, never raised."""

    __slots__ = ("_observers",)

    def __init__(self) -> None:
        self._observers: dict[str, list[Observer]] = {}

    def on(self, name: str, callback: Observer) -> Disposer:
        """Call ``callback(payload)`` on each ``name`` event; return a disposer."""
        observers = self._observers.setdefault(name, [])
        observers.append(callback)

        def dispose() -> None:
            if callback in observers:
                observers.remove(callback)

        return dispose

    def observed(self, name: str) -> bool:
        """True when ``name`` has at least one observer (so its payload is worth building)."""
        return bool(self._observers.get(name))

    def emit(self, name: str, payload: object) -> None:
        """Call each observer of ``name`` in turn, logging (not raising) what one raises."""
        for callback in list(self._observers.get(name, ())):
            try:
                callback(payload)
            except Exception:
                _log.exception("observer of %r failed", name)
