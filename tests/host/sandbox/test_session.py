"""Sessions: module globals carried from one run to the next, each run in a fresh child."""

from __future__ import annotations

import os
import pickle
from typing import Any

import anyio
import pytest

from host.sandbox import Session, SubprocessRuntime
from runtime import Limits, RunRequest, RunResult

pytestmark = pytest.mark.anyio

LIMITS = Limits(compute_ms=5_000, max_wall_ms=20_000)


async def step(session: Session, program: str, **kwargs: Any) -> RunResult:
    return await session.run(RunRequest(program=program, limits=LIMITS, **kwargs))


async def test_values_functions_classes_and_modules_carry_over(rt: SubprocessRuntime) -> None:
    async with rt.session() as s:
        first = await step(
            s,
            "import json, functools, dataclasses\n"
            "counter = 1\n"
            "table = {i: str(i) for i in range(1000)}\n"
            "def bump(n=1):\n    return counter + n\n"
            "def make(k):\n    def times(x):\n        return x * k\n    return times\n"
            "triple = make(3)\n"
            "square = lambda x: x * x\n"
            "@functools.lru_cache\ndef fib(n):\n    return n if n < 2 else fib(n - 1) + fib(n - 2)\n"
            "def logged(f):\n    @functools.wraps(f)\n    def inner(*a):\n        return ['logged', f(*a)]\n    return inner\n"
            "@logged\ndef hello(name):\n    return f'hello {name}'\n"
            "@dataclasses.dataclass\nclass Point:\n    x: int\n    y: int\n"
            "    def norm(self):\n        return abs(self.x) + abs(self.y) + counter\n"
            "p = Point(3, -4)\n",
        )
        assert first.error is None, first.error
        assert first.state_dropped == {}
        assert first.stats is not None and first.stats.state_bytes == len(s.state) > 0
        assert {
            "counter",
            "table",
            "bump",
            "triple",
            "square",
            "fib",
            "hello",
            "Point",
            "p",
            "json",
        } <= set(s.names)
        second = await step(
            s,
            "counter = 100\n"  # the functions see this run's globals, as in a REPL
            "[bump(), triple(2), square(5), fib(20), hello('you'), p.norm(), repr(Point(1, 1)),"
            " json.dumps(len(table)), type(p).__qualname__]",
        )
    assert second.error is None, second.error
    bumped, tripled, squared, fibbed, hello, norm, point, size, qualname = second.value
    assert (bumped, tripled, squared, fibbed) == (101, 6, 25, 6765)
    assert hello == ["logged", "hello you"]
    assert norm == 107
    assert point == "Point(x=1, y=1)"
    assert size == "1000"
    assert qualname == "Point"


async def test_what_cannot_be_carried_is_dropped_with_its_reason(rt: SubprocessRuntime) -> None:
    async with rt.session() as s:
        first = await step(
            s,
            "import threading, socket\n"
            "kept = [1, 2, 3]\n"
            "gen = (i for i in range(3))\n"
            "lock = threading.Lock()\n"
            "f = open('notes.txt', 'w')\n"
            "sock = socket.socketpair()[0]\n",
        )
        assert first.error is None, first.error
        assert set(first.state_dropped) == {"gen", "lock", "f", "sock"}
        assert "generator" in first.state_dropped["gen"]
        assert "reopen" in first.state_dropped["f"]
        assert first.to_json()["state_dropped"] == first.state_dropped
        second = await step(s, "[kept, 'gen' in globals(), 'f' in globals()]")
    assert second.value == [[1, 2, 3], False, False]
    assert "state_dropped" not in second.to_json()


async def test_a_failed_run_leaves_the_state_as_it_was(rt: SubprocessRuntime) -> None:
    async with rt.session() as s:
        await step(s, "n = 1")
        before = s.state
        failed = await step(s, "n = 2\nraise ValueError('no')")
        assert failed.error is not None and failed.error.kind == "exception"
        assert s.state == before
        assert (await step(s, "n")).value == 1


async def test_the_state_is_held_to_max_state_bytes(rt: SubprocessRuntime) -> None:
    async with rt.session(max_state_bytes=100_000) as s:
        await step(s, "small = 1")
        big = await step(s, "blob = 'x' * 1_000_000\nother = 'y' * 10")
        assert big.error is not None and big.error.kind == "state"
        assert "max_state_bytes (100000)" in big.error.message and "blob" in big.error.message
        assert (await step(s, "small")).value == 1


async def test_a_tampered_blob_fails_only_the_run(rt: SubprocessRuntime, tmp_path: Any) -> None:
    marker = tmp_path / "pwned"

    class Evil:
        def __reduce__(self) -> Any:
            return (os.system, (f"touch {marker}",))

    tampered = pickle.dumps({"x": Evil()})
    async with rt.session(state=b"not a pickle at all") as s:
        broken = await step(s, "1")
        assert broken.error is not None and broken.error.kind == "state"
        assert "cannot be restored" in broken.error.message
    async with rt.session(state=tampered) as s:
        await step(s, "1")  # loaded in the child only, under its containment
        assert not marker.exists()  # the host never unpickles; the child cannot write there
        ok = await step(s, "return 'still usable'")
        assert ok.value == "still usable"


async def test_two_sessions_are_independent_and_may_run_at_once(rt: SubprocessRuntime) -> None:
    async with rt.session() as a, rt.session() as b:
        await step(a, "who = 'a'")
        await step(b, "who = 'b'")
        results: dict[str, Any] = {}

        async def later(name: str, session: Session) -> None:
            results[name] = (
                await step(session, "import asyncio\nawait asyncio.sleep(0.3)\nwho")
            ).value

        with anyio.fail_after(10):
            async with anyio.create_task_group() as tg:
                tg.start_soon(later, "a", a)
                tg.start_soon(later, "b", b)
    assert results == {"a": "a", "b": "b"}


async def test_a_run_without_a_session_carries_nothing(rt: SubprocessRuntime) -> None:
    await rt.run(RunRequest(program="leftover = 1", limits=LIMITS))
    result = await rt.run(RunRequest(program="'leftover' in globals()", limits=LIMITS))
    assert result.value is False


async def test_a_session_can_start_from_an_earlier_sessions_state(rt: SubprocessRuntime) -> None:
    async with rt.session() as s:
        await step(s, "kept = {'k': [1, 2]}")
        saved = s.state
    async with rt.session(state=saved) as again:
        assert (await step(again, "kept")).value == {"k": [1, 2]}


async def test_commit_on_failure_keeps_the_names_assigned_before_an_exception(
    rt: SubprocessRuntime,
) -> None:
    async with rt.session(commit_on_failure=True) as s:
        await step(s, "a = 1")
        failed = await step(s, "a = 2\nb = [3]\n1 / 0\nc = 4")
        assert failed.error is not None and failed.error.kind == "exception"
        assert failed.stats is not None and failed.stats.state_bytes > 0
        assert set(s.names) == {"a", "b"}
        seen = await step(s, "return [a, b, 'c' in globals()]")
        assert seen.value == [2, [3], False]
        bad_result = await step(s, "d = 5\nreturn {1}")
        assert bad_result.error is not None and bad_result.error.kind == "invalid_completion"
        assert set(s.names) == {"a", "b", "d"}


async def test_commit_on_failure_still_drops_a_killed_runs_names(rt: SubprocessRuntime) -> None:
    async with rt.session(commit_on_failure=True) as s:
        await step(s, "a = 1")
        limits = Limits(compute_ms=200, max_wall_ms=20_000)
        killed = await s.run(RunRequest(program="a = 2\nwhile True:\n    pass", limits=limits))
        assert killed.error is not None and killed.error.kind == "budget"
        assert (await step(s, "return a")).value == 1


async def test_a_state_that_cannot_be_saved_after_a_failure_keeps_the_old_one(
    rt: SubprocessRuntime,
) -> None:
    async with rt.session(commit_on_failure=True, max_state_bytes=10_000) as s:
        await step(s, "a = 1")
        failed = await step(s, "a = 2\nbig = 'x' * 100_000\nraise ValueError('v')")
        assert failed.error is not None and failed.error.kind == "exception"
        assert "ValueError: v" in failed.error.message
        assert (await step(s, "return a")).value == 1
