"""Durable runs on the subprocess backend: pause, journal, resume by replay in a fresh child."""

from __future__ import annotations

import os
import time
from typing import Any

import anyio
import msgspec
import pytest

from host.sandbox import SubprocessRuntime
from runtime import Journal, JournalError, Limits, RunRequest, RunResult
from tests.durable import (
    CHARGE_THEN_RECEIPT,
    GATHER_THREE,
    SEEDED,
    SETTLE_ORDER,
    Shop,
    assert_the_gather_resumed_once_each,
)
from tests.host.sandbox.conftest import settled

pytestmark = pytest.mark.anyio

LIMITS = Limits(compute_ms=10_000, max_wall_ms=30_000)


async def _run(rt: Any, shop: Shop, program: str, **options: Any) -> RunResult:
    inputs = options.pop("inputs", {})
    limits = options.pop("limits", LIMITS)
    call_style = options.pop("call_style", "async")
    request = RunRequest(
        program=program, bindings=shop.bindings, inputs=inputs, limits=limits, call_style=call_style
    )
    result: RunResult = await rt.run(request, **options)
    return result


def _allow(paused: RunResult) -> dict[str, Any]:
    assert paused.paused and paused.journal is not None, paused.error
    journal = Journal.loads(paused.journal.dumps())  # as a file would bring it back
    return {"resume": journal, "decisions": {call.call_id: "allow" for call in paused.pending}}


async def test_charge_once_receipt_once_across_a_pause(rt: SubprocessRuntime) -> None:
    shop = Shop()
    paused = await _run(rt, shop, "import os\nprint(os.getcwd())\n" + CHARGE_THEN_RECEIPT)
    assert paused.paused and paused.error is None
    workdir, *logs = paused.logs
    assert logs == ["charging", "charged ch_1"]
    assert [(c.name, c.args) for c in paused.pending] == [
        ("tools.send_receipt", {"to": "a@example.com"})
    ]
    # nothing of the paused run is left: its directory goes with its processes (the fixture
    # checks processes, cgroups and fds when the runtime closes)
    await settled(rt)
    assert os.path.dirname(workdir) == rt.workdir_root and not os.path.exists(workdir)
    done = await _run(
        rt, shop, "import os\nprint(os.getcwd())\n" + CHARGE_THEN_RECEIPT, **_allow(paused)
    )
    assert done.ok and done.value == {
        "charge": {"id": "ch_1", "amount": 5},
        "receipt": "sent to a@example.com",
    }
    assert done.logs == ["receipt: sent to a@example.com"]
    assert shop.executed == {"charge": 1, "send_receipt": 1}
    run_id = paused.journal.run_id  # type: ignore[union-attr]
    assert shop.call_ids == [f"{run_id}:1", f"{run_id}:2"]


async def test_a_refusal_raises_in_the_program_and_nothing_runs_twice(
    rt: SubprocessRuntime,
) -> None:
    shop = Shop()
    paused = await _run(rt, shop, CHARGE_THEN_RECEIPT)
    options = _allow(paused)
    options["decisions"] = dict.fromkeys(options["decisions"], "deny")
    done = await _run(rt, shop, CHARGE_THEN_RECEIPT, **options)
    assert done.ok and done.value["receipt"] == "refused (DENIED)"
    assert shop.executed == {"charge": 1, "send_receipt": 0}


async def test_a_gather_of_three_with_one_held(rt: SubprocessRuntime) -> None:
    shop = Shop()
    paused = await _run(rt, shop, GATHER_THREE)
    assert [p.seq for p in paused.pending] == [2]
    assert {c.seq for c in paused.journal.calls} <= {1, 3}  # type: ignore[union-attr]
    done = await _run(rt, shop, GATHER_THREE, **_allow(paused))
    assert_the_gather_resumed_once_each(paused, done)
    assert shop.executed == {"charge": 2, "send_receipt": 1}


async def test_a_replay_answers_in_the_order_the_calls_settled(rt: SubprocessRuntime) -> None:
    shop = Shop()
    paused = await _run(rt, shop, SETTLE_ORDER)
    assert [c.seq for c in paused.journal.calls] == [2, 3, 1, 4]  # type: ignore[union-attr]
    done = await _run(rt, shop, SETTLE_ORDER, **_allow(paused))
    assert done.ok, done.error
    assert done.value == [[{"id": "ch_4", "amount": 10}, {"id": "ch_2", "amount": 20}], "sent to c"]
    assert shop.executed == {"charge": 4, "send_receipt": 1}


async def test_random_and_set_order_are_the_same_on_replay(rt: SubprocessRuntime) -> None:
    shop = Shop()
    paused = await _run(rt, shop, SEEDED)
    first = msgspec.json.decode(paused.journal.calls[0].args)["seen"]  # type: ignore[union-attr]
    done = await _run(rt, shop, SEEDED, **_allow(paused))
    assert done.ok, done.error  # a child that saw other values would have diverged
    assert done.value[:3] == first
    assert shop.executed == {"charge": 1, "send_receipt": 1}


async def test_a_resume_on_another_runtime_replays_with_the_journals_seeds(
    rt: SubprocessRuntime, workdir_root: str
) -> None:
    shop = Shop()
    paused = await _run(rt, shop, SEEDED)
    assert paused.journal is not None and paused.journal.seeds.hash == rt.hash_seed
    first = msgspec.json.decode(paused.journal.calls[0].args)["seen"]
    async with SubprocessRuntime(workdir_root=workdir_root) as other:  # a restarted process
        assert other.hash_seed != rt.hash_seed
        done = await _run(other, shop, SEEDED, **_allow(paused))
        assert done.ok, done.error
        assert done.value[:3] == first
        assert done.journal is not None and done.journal.seeds == paused.journal.seeds
        again = await _run(other, shop, "return hash('abc')")
        assert again.value != first[2]  # its own children keep their own seed
    assert shop.executed == {"charge": 1, "send_receipt": 1}


TIMED = """\
import time
if time.time() < deadline:
    await tools.charge(amount=1)
else:
    await tools.charge(amount=2)
await tools.send_receipt(to="e")
"""


async def test_a_program_that_branches_on_the_time_diverges_naming_the_step(
    rt: SubprocessRuntime,
) -> None:
    shop = Shop()
    deadline = time.time() + 3.0
    paused = await _run(rt, shop, TIMED, inputs={"deadline": deadline})
    assert msgspec.json.decode(paused.journal.calls[0].args) == {"amount": 1}  # type: ignore[union-attr]
    await anyio.sleep(max(deadline - time.time(), 0) + 0.05)
    result = await _run(rt, shop, TIMED, inputs={"deadline": deadline}, **_allow(paused))
    assert result.error is not None and result.error.kind == "replay_diverged"
    assert result.error.message == (
        'the replay diverged at step 1: the journal has tools.charge({"amount":1}), the '
        'program asked tools.charge({"amount":2})'
    )
    assert shop.executed == {"charge": 1, "send_receipt": 0}


async def test_a_recorded_call_the_program_no_longer_makes_diverges(rt: SubprocessRuntime) -> None:
    shop = Shop()
    program = (
        "await tools.charge(amount=1)\nif more:\n    await tools.charge(amount=2)\n    1 / 0\n"
    )
    failed = await _run(rt, shop, program, inputs={"more": True})
    assert failed.error is not None and failed.error.kind == "exception"
    assert failed.journal is not None
    journal = msgspec.structs.replace(failed.journal, inputs_sha256=_digest({"more": False}))
    result = await _run(rt, shop, program, inputs={"more": False}, resume=journal)
    assert result.error is not None and result.error.kind == "replay_diverged"
    assert result.error.message == (
        'the replay diverged at step 2: the journal has tools.charge({"amount":2}), and the '
        "program ended without asking it"
    )


def _digest(inputs: dict[str, Any]) -> str:
    from runtime._journal import inputs_digest

    return inputs_digest(inputs)


async def test_a_journal_of_another_program_is_refused_and_the_runtime_goes_on(
    rt: SubprocessRuntime,
) -> None:
    shop = Shop()
    paused = await _run(rt, shop, CHARGE_THEN_RECEIPT)
    with pytest.raises(JournalError, match="another program"):
        await _run(rt, shop, "return 1", resume=paused.journal)
    assert (await _run(rt, shop, "return 2")).value == 2


async def test_a_journal_over_its_bound_fails_the_run_clearly(rt: SubprocessRuntime) -> None:
    shop = Shop()
    program = "for i in range(20):\n    await tools.charge(amount=i)\nreturn 'all'\n"
    limits = msgspec.structs.replace(LIMITS, max_journal_bytes=200)
    result = await _run(rt, shop, program, limits=limits)
    assert result.error is not None and result.error.kind == "output_limit"
    assert "the journal passed max_journal_bytes (200)" in result.error.message
    assert result.journal is not None and result.journal.size <= 200
    assert [c.seq for c in result.journal.calls] == list(range(1, len(result.journal.calls) + 1))
    assert len(result.journal.calls) >= 3


async def test_plain_calls_from_threads_replay(rt: SubprocessRuntime) -> None:
    # Calls match in the order of issue: threads that raced to issue would race again on the
    # replay (README, "Durable runs"), so these issue in turn, each from a worker thread.
    shop = Shop()
    program = (
        "from concurrent.futures import ThreadPoolExecutor\n"
        "with ThreadPoolExecutor(2) as pool:\n"
        "    got = [pool.submit(tools.charge, amount=n).result() for n in (1, 2)]\n"
        "tools.send_receipt(to='f')\n"
        "return sorted(g['amount'] for g in got)\n"
    )
    paused = await _run(rt, shop, program, call_style="sync")
    assert paused.paused, paused.error
    done = await _run(rt, shop, program, call_style="sync", **_allow(paused))
    assert done.ok and done.value == [1, 2], done.error
    assert shop.executed == {"charge": 2, "send_receipt": 1}


async def test_a_paused_session_step_commits_nothing_and_its_resume_commits(
    rt: SubprocessRuntime,
) -> None:
    shop = Shop()
    async with rt.session() as session:
        first = await session.run(RunRequest(program="n = 1", bindings=shop.bindings))
        assert first.ok
        step = "n = n + 10\nawait tools.send_receipt(to='g')\nreturn n\n"
        paused = await session.run(RunRequest(program=step, bindings=shop.bindings))
        assert paused.paused and paused.journal is not None
        assert paused.journal.state_sha256 is not None
        assert (await session.run(RunRequest(program="return n"))).value == 1  # not committed
        done = await session.run(RunRequest(program=step, bindings=shop.bindings), **_allow(paused))
        assert done.ok and done.value == 11
        assert (await session.run(RunRequest(program="return n"))).value == 11
        # the state moved on since: the old journal no longer fits the session
        with pytest.raises(JournalError, match="state"):
            await session.run(RunRequest(program=step, bindings=shop.bindings), **_allow(paused))


def test_the_hash_seed_is_checked() -> None:
    for bad in (0, -1, 2**32, 1.5, "7"):
        with pytest.raises(ValueError, match="hash_seed"):
            SubprocessRuntime(hash_seed=bad)  # type: ignore[arg-type]
    assert SubprocessRuntime(hash_seed=7).hash_seed == 7
    drawn = {SubprocessRuntime().hash_seed for _ in range(5)}
    assert len(drawn) > 1 and all(1 <= seed < 2**32 for seed in drawn)


async def test_children_take_the_runtimes_hash_seed(workdir_root: str) -> None:
    async with SubprocessRuntime(workdir_root=workdir_root, hash_seed=12345) as runtime:
        result = await runtime.run(
            RunRequest(
                program="return [hash('abc'), __import__('os').environ.get('PYTHONHASHSEED')]"
            )
        )
    import subprocess
    import sys

    expected = subprocess.run(
        [sys.executable, "-c", "print(hash('abc'))"],
        env={"PYTHONHASHSEED": "12345"},
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert result.value == [int(expected), None]  # the program's environment stays empty
