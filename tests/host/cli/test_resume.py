"""``dsh-code run --journal FILE`` and ``dsh-code resume FILE``: a paused run continued by
another process, no tool executed twice; the journal file kept safely."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from host.cli._errors import EXIT_PAUSED
from tests.durable import CHARGE_THEN_RECEIPT
from tests.host.mcp.servers.shop_bindings import executions

from .support import env, run

pytestmark = pytest.mark.timeout(180)

BINDINGS = Path(__file__).resolve().parents[2] / "host" / "mcp" / "servers" / "shop_bindings.py"
#: The charge's arguments carry a set's order: a resume in children of another hash seed
#: would ask other arguments, and diverge.
PROGRAM = CHARGE_THEN_RECEIPT.replace(
    "tools.charge(amount=5)", "tools.charge(amount=5 + 0 * len(list({'a', 'b', 'c', 'd', 'e'})))"
)


@pytest.fixture
def shop(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    ledger = tmp_path / "ledger"
    program = tmp_path / "prog.py"
    program.write_text(PROGRAM)
    return program, env(SHOP_LEDGER=str(ledger))


def _run(shop: tuple[Path, dict[str, str]], journal: Path, *flags: str) -> object:
    program, environment = shop
    return run(
        "run", str(program), "-b", str(BINDINGS), "--journal", str(journal), *flags, env=environment
    )


def _resume(shop: tuple[Path, dict[str, str]], journal: Path, *flags: str) -> object:
    return run("resume", str(journal), *flags, env=shop[1])


def _executed(shop: tuple[Path, dict[str, str]]) -> dict[str, int]:
    return executions(shop[1]["SHOP_LEDGER"])


@pytest.mark.parametrize("approve", [True, False])
def test_a_paused_run_continues_in_another_process(
    tmp_path: Path, shop: tuple[Path, dict[str, str]], approve: bool
) -> None:
    journal = tmp_path / "run.journal"
    first = _run(shop, journal)
    assert first.returncode == EXIT_PAUSED, first.stderr  # type: ignore[attr-defined]
    assert first.stdout == "charging\ncharged ch_1\n"  # type: ignore[attr-defined]
    assert "the program paused; it waits on:" in first.stderr  # type: ignore[attr-defined]
    assert f"dsh-code resume {journal} --yes" in first.stderr  # type: ignore[attr-defined]
    assert stat.S_IMODE(os.stat(journal).st_mode) == 0o600
    assert _executed(shop) == {"charge": 1, "send_receipt": 0}
    second = _resume(shop, journal, "--yes" if approve else "--no", "--json")
    out = json.loads(second.stdout)  # type: ignore[attr-defined]
    assert second.returncode == 0, second.stderr  # type: ignore[attr-defined]
    receipt = "sent to a@example.com" if approve else "refused (DENIED)"
    assert out == {
        "value": {"charge": {"id": "ch_1", "amount": 5}, "receipt": receipt},
        "logs": [f"receipt: {receipt}"],
        "journal": str(journal),
    }
    assert _executed(shop) == {"charge": 1, "send_receipt": 1 if approve else 0}
    kept = json.loads(journal.read_text())  # rewritten: the completed run's journal
    assert kept["format"] == "dsh-code-run" and kept["journal"]["pending"] == []
    assert [call["name"] for call in kept["journal"]["calls"]] == [
        "tools.charge",
        "tools.send_receipt",
    ]


def test_without_a_decision_a_resume_asks_again_and_pauses_again(
    tmp_path: Path, shop: tuple[Path, dict[str, str]]
) -> None:
    journal = tmp_path / "run.journal"
    assert _run(shop, journal, "--json").returncode == EXIT_PAUSED  # type: ignore[attr-defined]
    again = _resume(shop, journal, "--json")
    assert again.returncode == EXIT_PAUSED  # type: ignore[attr-defined]
    out = json.loads(again.stdout)  # type: ignore[attr-defined]
    assert out["logs"] == [] and out["journal"] == str(journal)
    assert [p["name"] for p in out["pending"]] == ["tools.send_receipt"]
    assert _executed(shop) == {"charge": 1, "send_receipt": 0}
    done = _resume(shop, journal, "--yes")
    assert done.returncode == 0 and _executed(shop) == {"charge": 1, "send_receipt": 1}  # type: ignore[attr-defined]


def test_without_a_journal_a_pause_says_how_to_keep_one(
    tmp_path: Path, shop: tuple[Path, dict[str, str]]
) -> None:
    program, environment = shop
    hook = tmp_path / "pause.py"
    hook.write_text(
        "from host.tools import Pause, tool\n"
        "@tool\n"
        "def noop() -> int:\n"
        '    """Nothing."""\n'
        "    return 0\n"
        "def setup_registry(registry):\n"
        "    registry.pre_execute(lambda call, d: Pause('later') if call.name == 'send_receipt' else None)\n"
    )
    result = run("run", str(program), "-b", str(BINDINGS), "-b", str(hook), env=environment)
    assert result.returncode == EXIT_PAUSED
    assert "send_receipt" in result.stderr and "--journal FILE" in result.stderr
    # without --journal an unanswerable ask is still a denial, as before
    denied = run("run", str(program), "-b", str(BINDINGS), env=environment)
    assert denied.returncode == 0 and "refused (DENIED)" in denied.stdout


@pytest.mark.parametrize(
    ("damage", "says"),
    [
        (lambda text: text.replace('"ch_1"', '"ch_9"'), "altered"),
        (lambda text: text[: len(text) // 2], "damaged"),
        (lambda text: "not json", "damaged"),
        (lambda text: text.replace('"dsh-code-run"', '"other"'), "not a journal file"),
    ],
)
def test_a_tampered_or_truncated_journal_fails_only_its_resume(
    tmp_path: Path, shop: tuple[Path, dict[str, str]], damage: object, says: str
) -> None:
    journal = tmp_path / "run.journal"
    assert _run(shop, journal).returncode == EXIT_PAUSED  # type: ignore[attr-defined]
    journal.write_text(damage(journal.read_text()))  # type: ignore[operator]
    result = _resume(shop, journal, "--yes")
    assert result.returncode == 2, result.stderr  # type: ignore[attr-defined]
    assert says in result.stderr  # type: ignore[attr-defined]
    assert _executed(shop) == {"charge": 1, "send_receipt": 0}


def test_the_journal_is_never_written_through_a_link(
    tmp_path: Path, shop: tuple[Path, dict[str, str]]
) -> None:
    target = tmp_path / "elsewhere"
    target.write_text("keep me")
    link = tmp_path / "run.journal"
    link.symlink_to(target)
    result = _run(shop, link)
    assert result.returncode == 2 and "symbolic link" in result.stderr  # type: ignore[attr-defined]
    assert target.read_text() == "keep me" and _executed(shop)["charge"] == 0
    resumed = _resume(shop, link, "--yes")
    assert resumed.returncode == 2 and "symbolic link" in resumed.stderr  # type: ignore[attr-defined]


def test_a_session_file_commits_only_the_resumed_step(
    tmp_path: Path, shop: tuple[Path, dict[str, str]]
) -> None:
    environment = shop[1]
    state = tmp_path / "agent.state"
    first = run("run", "-", "--session", str(state), stdin="n = 1\n", env=environment)
    assert first.returncode == 0, first.stderr
    step = tmp_path / "step.py"
    step.write_text("n = n + 10\nawait tools.send_receipt(to='s')\nreturn n\n")
    journal = tmp_path / "step.journal"
    paused = run(
        "run",
        str(step),
        "-b",
        str(BINDINGS),
        "--session",
        str(state),
        "--journal",
        str(journal),
        env=environment,
    )
    assert paused.returncode == EXIT_PAUSED, paused.stderr
    look = run("run", "-", "--session", str(state), stdin="return n\n", env=environment)
    assert look.stdout.strip() == "1"  # the paused step committed nothing
    done = _resume(shop, journal, "--yes")
    assert done.returncode == 0 and done.stdout.strip() == "11", done.stderr  # type: ignore[attr-defined]
    after = run("run", "-", "--session", str(state), stdin="return n\n", env=environment)
    assert after.stdout.strip() == "11"


def test_yes_and_no_exclude_each_other(tmp_path: Path) -> None:
    result = run("resume", str(tmp_path / "none"), "--yes", "--no")
    assert result.returncode == 2 and "exclude each other" in result.stderr
    missing = run("resume", str(tmp_path / "none"))
    assert missing.returncode == 2 and "no journal file" in missing.stderr
