"""The typed hook lists and the named events the registry keeps for the pipeline."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from host.tools._hooks import Events, HookList

# an operation: ("add", order, timed_only) or ("dispose", which added entry, counted mod size)
operations = st.lists(
    st.one_of(
        st.tuples(st.just("add"), st.integers(-3, 3), st.booleans()),
        st.tuples(st.just("dispose"), st.integers(0, 50), st.booleans()),
    ),
    max_size=40,
)


@given(operations)
def test_snapshots_are_the_live_hooks_by_order_then_addition(ops: list[Any]) -> None:
    hooks: HookList[str] = HookList()
    live: list[tuple[int, int, str, bool]] = []  # the model: (order, added, hook, timed_only)
    disposers: list[Any] = []
    for index, (op, number, flag) in enumerate(ops):
        if op == "add":
            name = f"h{index}"
            disposers.append((hooks.add(name, number, timed_only=flag), name))
            live.append((number, index, name, flag))
        elif disposers:
            dispose, name = disposers[number % len(disposers)]
            dispose()
            dispose()  # a second call does nothing
            live = [entry for entry in live if entry[2] != name]
        ordered = sorted(live)
        assert hooks.snapshot() == tuple(hook for _, _, hook, _ in ordered)
        untimed = tuple(hook for _, _, hook, timed_only in ordered if not timed_only)
        assert hooks.snapshot(timed=False) == untimed


def test_a_snapshot_is_reused_until_the_list_changes() -> None:
    hooks: HookList[str] = HookList()
    hooks.add("a")
    first = hooks.snapshot()
    assert hooks.snapshot() is first
    dispose = hooks.add("b", -1)
    assert hooks.snapshot() == ("b", "a")
    dispose()
    assert hooks.snapshot() == ("a",)


def test_events_call_observers_in_order_and_log_a_failing_one(
    caplog: pytest.LogCaptureFixture,
) -> None:
    events = Events()
    seen: list[Any] = []

    def broken(_payload: Any) -> None:
        raise RuntimeError("observer bug")

    assert not events.observed("x")
    events.on("x", broken)
    dispose = events.on("x", seen.append)
    assert events.observed("x")
    with caplog.at_level(logging.ERROR, logger="host.tools"):
        events.emit("x", 1)
    assert seen == [1]
    [record] = caplog.records
    assert record.getMessage() == "observer of 'x' failed"
    assert record.exc_info is not None
    dispose()
    dispose()
    events.emit("x", 2)
    assert seen == [1]
