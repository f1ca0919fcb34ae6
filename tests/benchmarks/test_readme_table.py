"""benchmarks/readme_table.py on fake results: the block, full runs only, the README rewritten."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks.readme_table import END, START, main, partial, render, replace_block
from tests.benchmarks import fake

ROOT = Path(__file__).resolve().parents[2]


def test_the_block_has_the_run_and_one_row_per_target() -> None:
    block = render(fake.results())
    header, blank, head, rule, *rows = block.splitlines()
    assert header.startswith("Latest full run: commit abc1234, 2026-12-01 12:00:00 UTC; 2 cores")
    assert "load average 0.50/0.25/0.12 at start and 1.50/1.00/0.75 at end" in header
    assert "pydantic-monty 1.4.0" in header and "`benchmarks/readme_table.py`" in header
    assert blank == ""
    assert head == "| what | target | measured | met | peer in the same run |"
    assert rule == "|---|---|---|---|---|"
    assert rows == [
        "| trivial run, back to back | p50 ≤ 2 ms (1x monty fresh (2)); stretch ≤ 1 ms | "
        "2.50 / 4.00 ms (n 4, 2 failed) | no (stretch: no) | monty fresh worker 2 / 3 ms |",
        "| never measured | p50 ≤ 1 ms | n/a (not installed) | n/a |  |",
        "| compute overshoot | p50 ≤ 2 ms | 1.00 / 1.50 ms (n 2) | yes |  |",
    ]


def test_only_a_full_run_is_a_full_run() -> None:
    assert partial(fake.results()) is None
    assert partial(fake.results(quick=True)) == "a quick run (--quick)"
    assert partial(fake.results(sections=("startup",))) is not None
    assert "not a full run" in render(fake.results(quick=True)).splitlines()[0]


def test_the_block_replaces_what_is_between_the_markers() -> None:
    readme = f"# x\n\nbefore\n{START}\nold table\n{END}\nafter\n"
    out = replace_block(readme, "new table")
    assert out == f"# x\n\nbefore\n{START}\nnew table\n{END}\nafter\n"
    assert replace_block(out, "new table") == out
    with pytest.raises(ValueError, match="no"):
        replace_block("# no markers\n", "t")


def _results(tmp_path: Path, *, quick: bool = False) -> Path:
    path = tmp_path / "results.json"
    path.write_text(json.dumps(fake.results(quick=quick)))
    return path


def test_main_writes_the_readme(tmp_path: Path) -> None:
    readme = tmp_path / "README.md"
    readme.write_text(f"intro\n{START}\n{END}\nend\n")
    assert main([str(_results(tmp_path)), "--write", str(readme)]) == 0
    text = readme.read_text()
    assert text.startswith(f"intro\n{START}\nLatest full run: commit abc1234")
    assert text.endswith(
        f"| compute overshoot | p50 ≤ 2 ms | 1.00 / 1.50 ms (n 2) | yes |  |\n{END}\nend\n"
    )


def test_main_refuses_a_quick_run_unless_allowed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _results(tmp_path, quick=True)
    assert main([str(path)]) == 2
    assert "a quick run" in capsys.readouterr().err
    assert main([str(path), "--allow-partial"]) == 0
    assert "| trivial run, back to back |" in capsys.readouterr().out


def test_main_says_what_it_cannot_read_or_write(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([str(tmp_path / "missing.json")]) == 2
    assert "cannot read" in capsys.readouterr().err
    readme = tmp_path / "README.md"
    readme.write_text("no markers\n")
    assert main([str(_results(tmp_path)), "--write", str(readme)]) == 2
    assert "cannot write" in capsys.readouterr().err
    assert readme.read_text() == "no markers\n"


def test_the_project_readme_has_the_markers() -> None:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert text.count(START) == 1 and text.count(END) == 1
    assert text.index(START) < text.index(END)
