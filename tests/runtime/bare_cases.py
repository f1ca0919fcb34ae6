"""Programs ending in a bare expression whose value is not JSON, for every runtime's tests."""

from __future__ import annotations

from typing import Any

#: (program, the result's value, whether it is a repr) for a run that succeeds.
SHOWN: list[tuple[str, Any, bool]] = [
    ("s = {1, 2}\ns", "{1, 2}", True),
    ("(1, 'a')", "(1, 'a')", True),
    ("import datetime\ndatetime.date(2024, 1, 2)", "datetime.date(2024, 1, 2)", True),
    ("float('nan')", "nan", True),
    ("class P:\n    def __repr__(self):\n        return 'P()'\nP()", "P()", True),
    ("'text'", "text", False),
    ("[1, (2, 3)][0]", 1, False),
]

#: (program, a part of the message) for a run that fails ``invalid_completion``.
REFUSED: list[tuple[str, str]] = [
    ("return {1, 2}", "the result is not lossless JSON: set at $"),
    ("x = (1, 2)\nreturn x", "the result is not lossless JSON: tuple at $"),
    (
        "class A:\n    def __repr__(self):\n        raise ValueError('no')\nA()",
        "the result is not lossless JSON: A at $, and repr() of it raised ValueError",
    ),
]
