"""The terminal's view of a run's logs: a live head, one line for what was dropped, a tail."""

from __future__ import annotations

from host.cli._logview import TerminalLogView


def _view(rows: int = 10, columns: int = 20) -> tuple[TerminalLogView, list[str]]:
    shown: list[str] = []
    return TerminalLogView(shown.append, rows, columns), shown


def test_logs_within_a_screenful_are_all_shown_the_held_ones_at_the_end() -> None:
    view, shown = _view()
    for i in range(6):
        view.line(f"l{i}")
    assert shown == ["l0", "l1", "l2", "l3", "l4"] and view.held == 1  # half the rows: live
    view.finish()
    assert shown == [f"l{i}" for i in range(6)]


def test_lines_count_the_rows_they_wrap_to() -> None:
    view, shown = _view(rows=10, columns=20)
    view.line("x" * 45)  # three rows
    view.line("y" * 41)  # three more would pass the head's five
    assert shown == ["x" * 45] and view.held == 1


def test_past_a_screenful_one_line_stands_for_what_was_dropped() -> None:
    view, shown = _view(rows=10, columns=20)  # head 5 rows, tail 1 row
    for i in range(100):
        view.line(f"l{i}")
    view.finish()
    dropped = sum(len(f"l{i}") + 1 for i in range(5, 99))
    assert shown == [
        *(f"l{i}" for i in range(5)),
        f"[... 94 lines ({dropped:,} bytes) of the logs left out here; --full-logs shows every "
        "line]",
        "l99",
    ]


def test_a_line_longer_than_the_tail_shows_its_end() -> None:
    view, shown = _view(rows=12, columns=10)  # head 6 rows, tail 2 rows: 20 characters
    view.line("a" * 100)
    view.finish()
    assert shown == [
        "[... 1 line (80 bytes) of the logs left out here; --full-logs shows every line]",
        "a" * 20,
    ]
