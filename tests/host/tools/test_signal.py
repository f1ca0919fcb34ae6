"""AbortSignal and AbortController: firing once, waiting, callbacks and fused signals."""

from __future__ import annotations

import anyio
import pytest

from host.tools import AbortController, AbortSignal, fuse_signals


def test_controller_fires_once_with_the_first_reason() -> None:
    controller = AbortController()
    assert not controller.signal.is_set()
    assert controller.signal.reason is None
    controller.abort("first")
    controller.abort("second")
    assert controller.signal.is_set()
    assert controller.signal.reason == "first"


def test_signal_has_no_abort_method() -> None:
    assert not hasattr(AbortSignal(), "abort")


@pytest.mark.anyio
async def test_wait_returns_when_aborted() -> None:
    controller = AbortController()
    woke: list[bool] = []

    async def waiter() -> None:
        await controller.signal.wait()
        woke.append(True)

    async with anyio.create_task_group() as group:
        group.start_soon(waiter)
        group.start_soon(waiter)
        await anyio.sleep(0.01)
        assert woke == []
        controller.abort()
    assert woke == [True, True]
    await controller.signal.wait()  # already set: returns at once


@pytest.mark.anyio
async def test_cancelled_wait_leaves_no_waiter_behind() -> None:
    signal = AbortSignal()
    with anyio.move_on_after(0.01):
        await signal.wait()
    assert signal._waiters == []


def test_callbacks_run_once_and_can_be_disposed() -> None:
    controller = AbortController()
    seen: list[object] = []
    controller.signal.add_callback(seen.append)
    dispose = controller.signal.add_callback(lambda r: seen.append(("gone", r)))
    dispose()
    controller.abort("why")
    controller.abort("again")
    assert seen == ["why"]
    controller.signal.add_callback(seen.append)  # late subscriber is called at once
    assert seen == ["why", "why"]


def test_fused_signal_fires_with_either_parent() -> None:
    first, second = AbortController(), AbortController()
    fused, dispose = fuse_signals(first.signal, second.signal)
    assert not fused.is_set()
    second.abort("b")
    assert fused.is_set()
    assert fused.reason == "b"
    dispose()


def test_fused_signal_disposed_links_are_gone() -> None:
    first = AbortController()
    fused, dispose = fuse_signals(first.signal, AbortSignal())
    dispose()
    first.abort()
    assert not fused.is_set()


def test_fusing_one_signal_returns_it() -> None:
    signal = AbortSignal()
    assert fuse_signals(signal, None)[0] is signal


def test_fusing_an_aborted_signal_is_aborted() -> None:
    controller = AbortController()
    controller.abort("early")
    fused, _ = fuse_signals(controller.signal, AbortSignal())
    assert fused.is_set()
    assert fused.reason == "early"
